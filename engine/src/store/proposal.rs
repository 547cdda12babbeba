//! Proposals (docs/DESIGN.md §20): an action that needs two approvers, proposed by one and
//! waiting for a different person to confirm or decline it before it expires.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use crate::domain::OperatorAction;

/// A proposal, pending or decided.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Proposal {
    pub id: Uuid,
    pub step: Uuid,
    pub action: OperatorAction,
    /// What the action needs besides a reason (`residual_uncertainty` for a waiver).
    pub params: Value,
    /// The person behind it: an operator, or the account a token acts for.
    pub proposed_by: String,
    /// Whom the audit log names for it.
    pub proposed_as: String,
    pub reason: String,
    pub step_version: i64,
    pub proposed_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// `confirmed`, `declined` or `expired`; `None` while it waits.
    pub decision: Option<String>,
    pub decided_by: Option<String>,
    pub decision_reason: Option<String>,
}

/// A proposal to record.
pub struct NewProposal<'a> {
    pub step: Uuid,
    pub action: OperatorAction,
    pub params: &'a Value,
    pub proposed_by: &'a str,
    pub proposed_as: &'a str,
    pub reason: &'a str,
    pub step_version: i64,
    pub expires_after_secs: f64,
}

/// Records a proposal on a step, after marking one that expired unanswered as expired; `None`
/// when another proposal still waits on the step.
pub async fn propose(
    conn: &mut PgConnection,
    new: &NewProposal<'_>,
) -> sqlx::Result<Option<Proposal>> {
    sqlx::query!(
        r#"update proposal set decision = 'expired', decided_at = now()
           where step_id = $1 and decision is null and expires_at <= now()"#,
        new.step
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query_as!(
        Proposal,
        r#"insert into proposal (id, step_id, action, params, proposed_by, proposed_as, reason,
                                 step_version, expires_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, now() + make_interval(secs => $9))
           on conflict (step_id) where decision is null do nothing
           returning id, step_id as step, action as "action: OperatorAction", params, proposed_by,
                     proposed_as, reason, step_version,
                     proposed_at as "proposed_at: DateTime<Utc>",
                     expires_at as "expires_at: DateTime<Utc>", decision, decided_by, decision_reason"#,
        Uuid::now_v7(),
        new.step,
        new.action as OperatorAction,
        new.params,
        new.proposed_by,
        new.proposed_as,
        new.reason,
        new.step_version,
        new.expires_after_secs,
    )
    .fetch_optional(conn)
    .await
}

/// The proposal `id`, locked for deciding it.
pub async fn lock(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<Proposal>> {
    sqlx::query_as!(
        Proposal,
        r#"select id, step_id as step, action as "action: OperatorAction", params, proposed_by,
                  proposed_as, reason, step_version,
                  proposed_at as "proposed_at: DateTime<Utc>",
                  expires_at as "expires_at: DateTime<Utc>", decision, decided_by, decision_reason
           from proposal where id = $1 for update"#,
        id
    )
    .fetch_optional(conn)
    .await
}

/// Records the decision on a waiting proposal.
pub async fn decide(
    conn: &mut PgConnection,
    id: Uuid,
    decision: &str,
    by: &str,
    by_as: &str,
    reason: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update proposal set decision = $2, decided_by = $3, decided_as = $4,
                               decision_reason = $5, decided_at = now()
           where id = $1 and decision is null"#,
        id,
        decision,
        by,
        by_as,
        reason,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Proposal `id`, unlocked.
pub async fn get<'e, E>(executor: E, id: Uuid) -> sqlx::Result<Option<Proposal>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        Proposal,
        r#"select id, step_id as step, action as "action: OperatorAction", params, proposed_by,
                  proposed_as, reason, step_version,
                  proposed_at as "proposed_at: DateTime<Utc>",
                  expires_at as "expires_at: DateTime<Utc>", decision, decided_by, decision_reason
           from proposal where id = $1"#,
        id
    )
    .fetch_optional(executor)
    .await
}

/// The proposal waiting on `step`, expired or not (the page says which).
pub async fn waiting<'e, E>(executor: E, step: Uuid) -> sqlx::Result<Option<Proposal>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        Proposal,
        r#"select id, step_id as step, action as "action: OperatorAction", params, proposed_by,
                  proposed_as, reason, step_version,
                  proposed_at as "proposed_at: DateTime<Utc>",
                  expires_at as "expires_at: DateTime<Utc>", decision, decided_by, decision_reason
           from proposal where step_id = $1 and decision is null"#,
        step
    )
    .fetch_optional(executor)
    .await
}

/// The person a token acts for, if it was issued to one.
pub async fn token_person<'e, E>(executor: E, token: Uuid) -> sqlx::Result<Option<String>>
where
    E: Executor<'e, Database = Postgres>,
{
    Ok(
        sqlx::query_scalar!("select on_behalf_of from api_token where id = $1", token)
            .fetch_optional(executor)
            .await?
            .flatten(),
    )
}

/// How many proposals wait for a second approver now (expired ones left out).
pub async fn waiting_count<'e, E>(executor: E) -> sqlx::Result<i64>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from proposal where decision is null and expires_at > now()"#
    )
    .fetch_one(executor)
    .await
}
