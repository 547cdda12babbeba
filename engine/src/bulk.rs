//! Bulk recovery: one operator action over the exact rows a person previewed, at a set rate,
//! each row permitted (or refused) by the same decision as a single action. A row that
//! changed after the preview is refused as stale; a row that arrived later was never an item.
//! Runs are durable: a server that restarts resumes its unfinished runs.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::{OperatorAction, Role};
use crate::operate::{self, Action, ActionError, Request};
use crate::operators::Operator;

pub use crate::domain::actions::BULK_ACTIONS;

/// A run to create.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    pub operator: &'a Operator,
    pub action: OperatorAction,
    pub reason: &'a str,
    pub residual_uncertainty: Option<&'a str>,
    pub rate_per_sec: i32,
    /// The rows shown: step and the version it had on the preview.
    pub rows: &'a [(Uuid, i64)],
}

/// Why a run was not created.
#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

/// Records a run and its items; [`run`] performs them.
pub async fn create(pool: &PgPool, new: &NewRun<'_>) -> Result<Uuid, BulkError> {
    if !BULK_ACTIONS.contains(&new.action) {
        return Err(BulkError::Invalid(format!(
            "{} is decided one step at a time, not in bulk.",
            new.action.label()
        )));
    }
    if !new.operator.role.may(new.action) {
        return Err(BulkError::Invalid(format!(
            "{} needs a role above yours.",
            new.action.label()
        )));
    }
    if new.reason.trim().is_empty() {
        return Err(BulkError::Invalid("A reason is required.".into()));
    }
    if new.action == OperatorAction::Waive
        && new.residual_uncertainty.is_none_or(|r| r.trim().is_empty())
    {
        return Err(BulkError::Invalid(
            "A waiver names the residual uncertainty.".into(),
        ));
    }
    if new.rows.is_empty() {
        return Err(BulkError::Invalid("No rows were selected.".into()));
    }
    if !(1..=100).contains(&new.rate_per_sec) {
        return Err(BulkError::Invalid(
            "The rate is 1 to 100 steps per second.".into(),
        ));
    }
    let id = Uuid::now_v7();
    let (steps, versions): (Vec<Uuid>, Vec<i64>) = new.rows.iter().copied().unzip();
    let mut tx = pool.begin().await?;
    sqlx::query!(
        r#"insert into bulk_run (id, author, author_role, action, reason, residual_uncertainty, rate_per_sec)
           values ($1, $2, $3, $4, $5, $6, $7)"#,
        id,
        new.operator.username,
        new.operator.role as Role,
        new.action as OperatorAction,
        new.reason.trim(),
        new.residual_uncertainty,
        new.rate_per_sec,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!(
        r#"insert into bulk_item (run_id, step_id, seen_version)
           select $1, s, v from unnest($2::uuid[], $3::bigint[]) as t(s, v)
           on conflict do nothing"#,
        id,
        &steps,
        &versions,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(id)
}

/// Performs a run's pending items at its rate until none is left, then marks it finished.
/// Safe to call twice for one run: each item is claimed with `for update skip locked`.
pub async fn run(pool: &PgPool, id: Uuid) -> sqlx::Result<()> {
    let Some(r) = sqlx::query!(
        r#"select author, author_role as "role: Role", action as "action: OperatorAction",
                  reason, residual_uncertainty, rate_per_sec
           from bulk_run where id = $1 and finished_at is null"#,
        id
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(());
    };
    let operator = Operator {
        id: Uuid::nil(),
        username: r.author.clone(),
        role: r.role,
    };
    let pause = Duration::from_millis(1_000 / u64::try_from(r.rate_per_sec.max(1)).unwrap_or(1));
    loop {
        let mut tx = pool.begin().await?;
        let Some(item) = sqlx::query!(
            r#"select step_id, seen_version from bulk_item
               where run_id = $1 and outcome is null
               order by step_id limit 1 for update skip locked"#,
            id
        )
        .fetch_optional(&mut *tx)
        .await?
        else {
            break;
        };
        let action = match r.action {
            OperatorAction::CheckDestination => Action::CheckDestination,
            OperatorAction::RetrySameKey => Action::RetrySameKey,
            OperatorAction::Waive => Action::Waive {
                residual_uncertainty: r.residual_uncertainty.clone().unwrap_or_default(),
            },
            _ => Action::Cancel,
        };
        let result = operate::perform(
            pool,
            Request {
                operator: &operator,
                step: item.step_id,
                seen_version: Some(item.seen_version),
                reason: &r.reason,
                action,
            },
        )
        .await;
        let (outcome, message) = match result {
            Ok(done) => ("done", done.message),
            Err(
                e @ (ActionError::Forbidden(_)
                | ActionError::NotPermitted(_)
                | ActionError::Conflict(_)
                | ActionError::Invalid(_)
                | ActionError::NotFound),
            ) => ("refused", e.to_string()),
            Err(e) => ("failed", e.to_string()),
        };
        sqlx::query!(
            r#"update bulk_item set outcome = $3, message = $4, done_at = now()
               where run_id = $1 and step_id = $2"#,
            id,
            item.step_id,
            outcome,
            message,
        )
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        tokio::time::sleep(pause).await;
    }
    sqlx::query!(
        r#"update bulk_run set finished_at = now()
           where id = $1 and finished_at is null
             and not exists (select 1 from bulk_item where run_id = $1 and outcome is null)"#,
        id
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Runs every unfinished run (after a restart); returns how many there were.
pub async fn resume_all(pool: &PgPool) -> sqlx::Result<usize> {
    let runs = sqlx::query_scalar!(
        r#"select id from bulk_run where finished_at is null order by created_at"#
    )
    .fetch_all(pool)
    .await?;
    for id in &runs {
        spawn(pool.clone(), *id);
    }
    Ok(runs.len())
}

/// Runs `id` in the background; a run that stops on an error resumes at the next start.
pub fn spawn(pool: PgPool, id: Uuid) {
    tokio::spawn(async move {
        if let Err(error) = run(&pool, id).await {
            tracing::warn!(%error, run = %id, "bulk run stopped; it resumes at the next start");
        }
    });
}

/// A run's progress, for its page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub id: Uuid,
    pub author: String,
    pub action: OperatorAction,
    pub reason: String,
    pub rate_per_sec: i32,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Every item: step, workflow creation key, outcome (none while pending), message.
    pub items: Vec<(Uuid, String, Option<String>, Option<String>)>,
}

/// Run `id` with every item, or `None`.
pub async fn progress(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<Progress>> {
    let Some(r) = sqlx::query!(
        r#"select author, action as "action: OperatorAction", reason, rate_per_sec,
                  created_at as "created_at: DateTime<Utc>", finished_at as "finished_at: DateTime<Utc>"
           from bulk_run where id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let items = sqlx::query!(
        r#"select i.step_id, w.creation_key, i.outcome, i.message
           from bulk_item i join step s on s.id = i.step_id join workflow w on w.id = s.workflow_id
           where i.run_id = $1 order by i.done_at nulls last, i.step_id"#,
        id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|i| (i.step_id, i.creation_key, i.outcome, i.message))
    .collect();
    Ok(Some(Progress {
        id,
        author: r.author,
        action: r.action,
        reason: r.reason,
        rate_per_sec: r.rate_per_sec,
        created_at: r.created_at,
        finished_at: r.finished_at,
        items,
    }))
}

/// One row of a preview: the step as shown, and whether the action is permitted on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewRow {
    pub step_id: Uuid,
    pub creation_key: String,
    pub state: crate::domain::StepState,
    pub adapter: Option<String>,
    pub version: i64,
    /// Why the action would be refused on this row; `None` when it is permitted.
    pub refusal: Option<String>,
}

/// The exact rows `filter` selects now (at most `limit`; `true` when there are more), each
/// judged by the decision table for `action` under `role`.
pub async fn preview(
    pool: &PgPool,
    filter: &crate::review::QueueFilter,
    action: OperatorAction,
    role: Role,
    limit: i64,
) -> sqlx::Result<(Vec<PreviewRow>, bool)> {
    let mut rows = crate::review::queue(pool, filter, None, limit + 1).await?;
    let more = rows.len() > usize::try_from(limit).unwrap_or(usize::MAX);
    rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let mut conn = pool.acquire().await?;
    let mut preview = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(locked) = operate::facts(&mut conn, row.step_id, false).await? else {
            continue;
        };
        let refusal = match locked.facts() {
            None => Some("This step calls no destination.".to_owned()),
            Some(facts) => crate::domain::refusal(&facts, role, action),
        };
        preview.push(PreviewRow {
            step_id: row.step_id,
            creation_key: row.creation_key,
            state: locked.state,
            adapter: row.adapter,
            version: locked.version,
            refusal,
        });
    }
    Ok((preview, more))
}
