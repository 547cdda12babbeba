//! Alerts the engine raises from durable state: any invariant violation, an outcome unknown
//! for longer than a limit, a duplicate-effect incident opened. Each opens once per subject
//! (and resolves when its cause is gone), emits `alert.opened` through the outbox, and can
//! reach a webhook through the outbox too, so an alert is never lost nor sent twice.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::adapter::BoxFuture;
use crate::outbox::{Consumer, Event};
use crate::store::journal;

/// Thresholds of the alert rules.
#[derive(Debug, Clone, Copy)]
pub struct AlertRules {
    /// An outcome unknown (or waiting for review) longer than this raises an alert.
    pub max_unknown_age: Duration,
}

impl Default for AlertRules {
    fn default() -> Self {
        Self {
            max_unknown_age: Duration::from_secs(15 * 60),
        }
    }
}

/// An alert as the console shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub id: Uuid,
    pub rule: String,
    pub subject: String,
    pub details: Value,
    pub opened_at: DateTime<Utc>,
}

/// Evaluates every rule against durable state: opens alerts whose cause appeared, resolves
/// those whose cause is gone. Returns how many were opened.
pub async fn evaluate(pool: &PgPool, rules: &AlertRules) -> sqlx::Result<usize> {
    let max_age_secs = i64::try_from(rules.max_unknown_age.as_secs()).unwrap_or(i64::MAX);
    let mut tx = pool.begin().await?;
    let causes = sqlx::query!(
        r#"select 'invariant_violation' as "rule!", kind || ':' || subject as "subject!", evidence as "details!"
           from invariant_violation
           union all
           select 'unknown_outcome_age', s.id::text,
                  jsonb_build_object('step', s.id, 'state', s.state, 'since', s.unknown_since)
           from step s
           where s.state in ('outcome_unknown', 'review_required')
             and s.unknown_since < now() - make_interval(secs => $1::bigint)
           union all
           select 'duplicate_incident', i.id::text, jsonb_build_object('step', i.step_id)
           from integrity_incident i where i.kind = 'duplicate_effect' and i.resolved_at is null"#,
        max_age_secs,
    )
    .fetch_all(&mut *tx)
    .await?;
    let rules_now: Vec<String> = causes.iter().map(|c| c.rule.clone()).collect();
    let subjects_now: Vec<String> = causes.iter().map(|c| c.subject.clone()).collect();
    // Resolved: an open alert whose cause is no longer there. Invariant violations stay open
    // until a person resolves them: the record of a broken rule is the point.
    sqlx::query!(
        r#"update alert a set resolved_at = now()
           where a.resolved_at is null and a.rule <> 'invariant_violation'
             and not exists (select 1 from unnest($1::text[], $2::text[]) as c(rule, subject)
                             where c.rule = a.rule and c.subject = a.subject)"#,
        &rules_now,
        &subjects_now,
    )
    .execute(&mut *tx)
    .await?;
    let mut opened = 0;
    for cause in causes {
        let id = Uuid::now_v7();
        let inserted = sqlx::query!(
            r#"insert into alert (id, rule, subject, details) values ($1, $2, $3, $4)
               on conflict (rule, subject) where resolved_at is null do nothing"#,
            id,
            cause.rule,
            cause.subject,
            cause.details,
        )
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if inserted == 1 {
            journal::emit_global(
                &mut tx,
                "alert.opened",
                &json!({ "alert": id, "rule": cause.rule, "subject": cause.subject, "details": cause.details }),
            )
            .await?;
            opened += 1;
        }
    }
    tx.commit().await?;
    Ok(opened)
}

/// Every open alert, newest first.
pub async fn open(pool: &PgPool) -> sqlx::Result<Vec<Alert>> {
    sqlx::query_as!(
        Alert,
        r#"select id, rule, subject, details, opened_at as "opened_at: DateTime<Utc>"
           from alert where resolved_at is null order by opened_at desc limit 200"#
    )
    .fetch_all(pool)
    .await
}

/// The webhook's outbox consumer: queues each `alert.opened` event for delivery (once, by the
/// inbox); [`deliver_webhooks`] sends the queue.
pub struct Webhook {
    url: String,
}

impl Webhook {
    pub fn new(url: String) -> Self {
        Self { url }
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Consumer for Webhook {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn handle<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        event: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            if event.kind != "alert.opened" {
                return Ok(());
            }
            sqlx::query!(
                r#"insert into webhook_delivery (event_id, payload) values ($1, $2) on conflict do nothing"#,
                event.event_id,
                event.payload,
            )
            .execute(tx)
            .await?;
            Ok(())
        })
    }
}

/// Posts every queued webhook delivery to `url` with its event id as `Idempotency-Key`, and
/// marks each delivered once the receiver answered 2xx. Returns how many were delivered.
pub async fn deliver_webhooks(
    pool: &PgPool,
    client: &reqwest::Client,
    url: &str,
) -> sqlx::Result<usize> {
    let due = sqlx::query!(
        r#"select event_id, payload from webhook_delivery where delivered_at is null order by created_at limit 50"#
    )
    .fetch_all(pool)
    .await?;
    let mut delivered = 0;
    for d in due {
        let answer = client
            .post(url)
            .header("Idempotency-Key", d.event_id.to_string())
            .json(&d.payload)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let error = match answer {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("answered {}", r.status())),
            Err(e) => Some(e.to_string()),
        };
        sqlx::query!(
            r#"update webhook_delivery
                  set attempts = attempts + 1, last_error = $2,
                      delivered_at = case when $2::text is null then now() end
                where event_id = $1"#,
            d.event_id,
            error,
        )
        .execute(pool)
        .await?;
        delivered += usize::from(error.is_none());
    }
    Ok(delivered)
}
