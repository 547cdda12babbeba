//! Alerts and the webhook that carries them (docs/DESIGN.md §11): the causes read from durable
//! state, opening and resolving alerts, and the webhook's delivery queue.

use serde_json::Value;
use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

/// A reason for an alert that holds now: the rule, its subject, and what shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertCause {
    pub rule: String,
    pub subject: String,
    pub details: Value,
}

/// Every cause that holds now: each recorded invariant violation, each step outcome unknown
/// (or waiting for review) for longer than `max_age_secs`, each open duplicate-effect incident,
/// each adapter demoted to review by a contradiction seen in production, each adapter its
/// breaker holds (until a person resumes it).
pub async fn current_causes(
    conn: &mut PgConnection,
    max_age_secs: i64,
) -> sqlx::Result<Vec<AlertCause>> {
    let rows = sqlx::query!(
        r#"select 'invariant_violation' as "rule!", kind || ':' || subject as "subject!", evidence as "details!"
           from invariant_violation
           union all
           select 'unknown_outcome_age', s.id::text,
                  jsonb_build_object('step', s.id, 'state', s.state, 'since', s.unknown_since)
           from step s
           where s.waiting in ('outcome_unknown', 'review_required')
             and s.unknown_since < now() - make_interval(secs => $1::bigint)
           union all
           select 'duplicate_incident', i.id::text, jsonb_build_object('step', i.step_id)
           from integrity_incident i where i.kind = 'duplicate_effect' and i.resolved_at is null
           union all
           select 'adapter_demoted', a.name,
                  jsonb_build_object('reason', a.demoted_reason, 'since', a.demoted_at)
           from adapter a where a.demoted_at is not null
           union all
           select 'adapter_breaker', a.name,
                  jsonb_build_object('reason', a.held_reason, 'since', a.held_at,
                                     'tripped_by', a.held_evidence)
           from adapter a where a.held_by = 'breaker'"#,
        max_age_secs,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| AlertCause {
            rule: r.rule,
            subject: r.subject,
            details: r.details,
        })
        .collect())
}

/// Resolves every open alert whose (rule, subject) is not among the pairs `rules` ×
/// `subjects` (taken side by side). Invariant violations stay open until a person resolves
/// them: the record of a broken rule is the point.
pub async fn resolve_absent(
    conn: &mut PgConnection,
    rules: &[String],
    subjects: &[String],
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update alert a set resolved_at = now()
           where a.resolved_at is null and a.rule <> 'invariant_violation'
             and not exists (select 1 from unnest($1::text[], $2::text[]) as c(rule, subject)
                             where c.rule = a.rule and c.subject = a.subject)"#,
        rules,
        subjects,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Opens alert `id` for `rule` and `subject` unless one is open for them already; true when
/// this call opened it.
pub async fn open_alert(
    conn: &mut PgConnection,
    id: Uuid,
    rule: &str,
    subject: &str,
    details: &Value,
) -> sqlx::Result<bool> {
    let inserted = sqlx::query!(
        r#"insert into alert (id, rule, subject, details) values ($1, $2, $3, $4)
               on conflict (rule, subject) where resolved_at is null do nothing"#,
        id,
        rule,
        subject,
        details,
    )
    .execute(conn)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

/// Queues event `event_id` (an `alert.opened`) for the webhook, once.
pub async fn queue_webhook(
    conn: &mut PgConnection,
    event_id: Uuid,
    payload: &Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into webhook_delivery (event_id, payload) values ($1, $2) on conflict do nothing"#,
        event_id,
        payload,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Up to 50 queued webhook deliveries not yet delivered, oldest first: (event id, payload).
pub async fn due_webhooks<'e, E>(executor: E) -> sqlx::Result<Vec<(Uuid, Value)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select event_id, payload from webhook_delivery where delivered_at is null order by created_at limit 50"#
    )
    .fetch_all(executor)
    .await?;
    Ok(rows.into_iter().map(|d| (d.event_id, d.payload)).collect())
}

/// Records one attempt to deliver `event_id`: delivered when `error` is `None`, otherwise
/// the error kept for the next try.
pub async fn record_webhook_attempt<'e, E>(
    executor: E,
    event_id: Uuid,
    error: Option<String>,
) -> sqlx::Result<()>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query!(
        r#"update webhook_delivery
                  set attempts = attempts + 1, last_error = $2,
                      delivered_at = case when $2::text is null then now() end
                where event_id = $1"#,
        event_id,
        error,
    )
    .execute(executor)
    .await?;
    Ok(())
}
