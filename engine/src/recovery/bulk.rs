//! Bulk recovery: one operator action over the exact rows a person previewed, at a set rate,
//! each row permitted (or refused) by the same decision as a single action. A row that
//! changed after the preview is refused as stale; a row that arrived later was never an item.
//! Runs are durable: a server that restarts resumes its unfinished runs (docs/DESIGN.md §7).

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::{BulkOutcome, OperatorAction, Role};
use crate::operators::Operator;
use crate::store::bulk::{self as runs, NewRunRow, UnfinishedRun};

use super::admit::required;
use super::{Action, ActionError, Request};

pub use crate::domain::actions::{BULK_ACTIONS, BULK_MAX_ROWS};

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
        return Err(not_in_bulk(new.action));
    }
    if !new.operator.role.may(new.action) {
        return Err(BulkError::Invalid(format!(
            "{} needs a role above yours.",
            new.action.label()
        )));
    }
    let reason = required("A reason", new.reason, 2000).map_err(invalid)?;
    let residual_uncertainty = match new.residual_uncertainty {
        Some(r) if !r.trim().is_empty() => {
            Some(required("The residual uncertainty", r, 2000).map_err(invalid)?)
        }
        _ if new.action == OperatorAction::Waive => {
            return Err(BulkError::Invalid(
                "A waiver names the residual uncertainty.".into(),
            ));
        }
        _ => None,
    };
    if new.rows.is_empty() {
        return Err(BulkError::Invalid("No rows were selected.".into()));
    }
    if new.rows.len() > BULK_MAX_ROWS {
        return Err(BulkError::Invalid(format!(
            "A run takes at most {BULK_MAX_ROWS} rows; narrow the filter."
        )));
    }
    if !(1..=100).contains(&new.rate_per_sec) {
        return Err(BulkError::Invalid(
            "The rate is 1 to 100 steps per second.".into(),
        ));
    }
    if runs::unfinished_ids(pool).await?.len() >= MAX_UNFINISHED_RUNS {
        return Err(BulkError::Invalid(format!(
            "{MAX_UNFINISHED_RUNS} bulk runs are still going; start another when one has finished."
        )));
    }
    let (steps, versions): (Vec<Uuid>, Vec<i64>) = new.rows.iter().copied().unzip();
    if new.operator.adapters.is_some() {
        let adapters = runs::adapters_of(pool, &steps).await?;
        if let Some(outside) = adapters.iter().find(|a| !new.operator.may_use(a)) {
            return Err(BulkError::Invalid(format!(
                "A row is a step of adapter `{outside}`, which `{}` may not use; preview again.",
                new.operator.username
            )));
        }
    }
    let id = Uuid::now_v7();
    let mut tx = pool.begin().await?;
    runs::insert_run(
        &mut tx,
        &NewRunRow {
            id,
            author: &new.operator.username,
            author_role: new.operator.role,
            author_token: (new.operator.via == crate::operators::Via::Token)
                .then_some(new.operator.id),
            action: new.action,
            reason: &reason,
            residual_uncertainty: residual_uncertainty.as_deref(),
            rate_per_sec: new.rate_per_sec,
        },
    )
    .await?;
    let distinct: std::collections::BTreeSet<&Uuid> = steps.iter().collect();
    let items = runs::insert_items(&mut tx, id, &steps, &versions).await?;
    if items < distinct.len() as u64 {
        // Dropped with the transaction: nothing of the run is stored.
        return Err(BulkError::Invalid(format!(
            "{} of the rows name no step; preview again.",
            distinct.len() as u64 - items
        )));
    }
    tx.commit().await?;
    Ok(id)
}

/// The most runs going at once, across all operators: each runs in the server's own tasks.
pub const MAX_UNFINISHED_RUNS: usize = 8;

fn invalid(error: ActionError) -> BulkError {
    BulkError::Invalid(error.to_string())
}

/// The refusal of an action that is decided one step at a time.
fn not_in_bulk(action: OperatorAction) -> BulkError {
    BulkError::Invalid(format!(
        "{} is decided one step at a time, not in bulk.",
        action.label()
    ))
}

/// The single action a run's action stands for on each row. Every variant is named, so a new
/// operator action must be placed here, in bulk or not, before the engine builds.
fn action_for(action: OperatorAction, residual: Option<&str>) -> Result<Action, BulkError> {
    match action {
        OperatorAction::CheckDestination => Ok(Action::CheckDestination),
        OperatorAction::RetrySameKey => Ok(Action::RetrySameKey),
        OperatorAction::Waive => Ok(Action::Waive {
            residual_uncertainty: residual.unwrap_or_default().to_owned(),
        }),
        OperatorAction::Cancel => Ok(Action::Cancel),
        OperatorAction::AttachEvidence
        | OperatorAction::AuthorizeAnotherAttempt
        | OperatorAction::Replace
        | OperatorAction::ResolveIncident => Err(not_in_bulk(action)),
    }
}

/// Performs a run's pending items at its rate until none is left, then marks it finished.
/// Before each item the author's authority is read again: a disabled account, a revoked token
/// or a role that no longer permits the action stops the run there. Safe to call twice for
/// one run: each item is claimed with `for update skip locked`.
pub async fn run(pool: &PgPool, id: Uuid) -> sqlx::Result<()> {
    let Some(r) = runs::unfinished(pool, id).await? else {
        return Ok(());
    };
    let mut operator = Operator {
        id: r.author_token.unwrap_or_else(Uuid::nil),
        username: r.author.clone(),
        role: r.role,
        // A run acts as its author did: a token's items are audited as the API's.
        via: if r.by_token {
            crate::operators::Via::Token
        } else {
            crate::operators::Via::Console
        },
        // Every row was checked against a token's adapters when the run was created.
        adapters: None,
    };
    let pause = Duration::from_millis(1_000 / u64::try_from(r.rate_per_sec.max(1)).unwrap_or(1));
    loop {
        let mut tx = pool.begin().await?;
        let Some((step, seen_version)) = runs::claim_next_item(&mut tx, id).await? else {
            break;
        };
        match runs::author_role_now(&mut tx, id).await? {
            Some(role) if role.may(r.action) => operator.role = role,
            standing => {
                let why = lost_authority(&r, standing);
                runs::stop(&mut tx, id, "z29c", &why, &format!("Not performed: {why}")).await?;
                tx.commit().await?;
                tracing::info!(run = %id, reason = %why, "bulk run stopped");
                return Ok(());
            }
        }
        let (outcome, message) = perform_item(pool, &operator, &r, step, seen_version).await;
        runs::record_item_outcome(&mut tx, id, step, outcome, &message).await?;
        tx.commit().await?;
        tokio::time::sleep(pause).await;
    }
    runs::finish(pool, id).await?;
    Ok(())
}

/// Why a run's author can no longer act: `standing` is the role they hold now, if any.
fn lost_authority(run: &UnfinishedRun, standing: Option<Role>) -> String {
    match (standing, run.by_token) {
        (None, true) => format!("the token `{}` that started it was revoked", run.author),
        (None, false) => format!("its author `{}` was disabled", run.author),
        (Some(role), _) => format!(
            "its author `{}` is now a{} {}, which may not {}",
            run.author,
            if role.as_str().starts_with(['a', 'e', 'i', 'o', 'u']) {
                "n"
            } else {
                ""
            },
            role.as_str(),
            run.action.label().to_lowercase()
        ),
    }
}

/// Whether `operator` started `run`: the very token that did, or the person of that name (a
/// token named like a person, or like a revoked token, is neither).
fn started(run: &runs::RunSummary, operator: &Operator) -> bool {
    match (run.by_token, operator.via) {
        (true, crate::operators::Via::Token) => run.author_token == Some(operator.id),
        (false, crate::operators::Via::Console | crate::operators::Via::Cli) => {
            run.author == operator.username
        }
        _ => false,
    }
}

/// Stops run `id` at the request of `operator` (its author, or an approver), audited; its
/// pending items are refused. False when it had finished already.
pub async fn stop(
    pool: &PgPool,
    id: Uuid,
    operator: &Operator,
    reason: &str,
) -> Result<bool, BulkError> {
    let reason = required("A reason", reason, 2000).map_err(invalid)?;
    let Some(run) = runs::summary(pool, id).await? else {
        return Err(BulkError::Invalid(format!("No bulk run {id}.")));
    };
    if !started(&run, operator) && operator.role < Role::Approver {
        return Err(BulkError::Invalid(
            "Only the run's author or an approver may stop it.".into(),
        ));
    }
    let mut tx = pool.begin().await?;
    let message = format!("Not performed: stopped by {}: {reason}", operator.username);
    let stopped = runs::stop(&mut tx, id, &operator.username, &reason, &message).await?;
    if stopped {
        crate::store::journal::audit(
            &mut tx,
            &crate::store::journal::AuditEntry {
                actor: operator.actor(),
                action: crate::domain::AuditAction::BulkStop,
                workflow: None,
                step: None,
                reason: Some(&reason),
                details: serde_json::json!({ "run": id }),
            },
        )
        .await?;
    }
    tx.commit().await?;
    Ok(stopped)
}

/// Performs one item as a single action would be performed; returns its outcome (`done`,
/// `refused` or `failed`) and the message shown for it.
async fn perform_item(
    pool: &PgPool,
    operator: &Operator,
    run: &UnfinishedRun,
    step: Uuid,
    seen_version: i64,
) -> (BulkOutcome, String) {
    let action = match action_for(run.action, run.residual_uncertainty.as_deref()) {
        Ok(action) => action,
        Err(refused) => return (BulkOutcome::Refused, refused.to_string()),
    };
    let result = super::perform(
        pool,
        Request {
            operator,
            step,
            seen_version: Some(seen_version),
            reason: &run.reason,
            action,
        },
    )
    .await;
    match result {
        Ok(done) => (BulkOutcome::Done, done.message),
        Err(
            e @ (ActionError::Forbidden(_)
            | ActionError::NotPermitted(_)
            | ActionError::Stale(_)
            | ActionError::Conflict(_)
            | ActionError::Invalid(_)
            | ActionError::NotFound),
        ) => (BulkOutcome::Refused, e.to_string()),
        Err(e) => {
            // The item's message is shown on the run's page: the driver's text goes to the log.
            if let ActionError::Sqlx(error) = &e {
                tracing::warn!(%error, %step, "a bulk item failed on a database error");
            }
            (BulkOutcome::Failed, e.to_string())
        }
    }
}

/// Runs every unfinished run (after a restart); returns how many there were.
pub async fn resume_all(pool: &PgPool) -> sqlx::Result<usize> {
    let unfinished = runs::unfinished_ids(pool).await?;
    for id in &unfinished {
        spawn(pool.clone(), *id);
    }
    Ok(unfinished.len())
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
    /// Who stopped it and why, when it was stopped.
    #[serde(default)]
    pub stopped: Option<(String, String)>,
    /// Every item: step, workflow creation key, outcome (none while pending), message.
    pub items: Vec<(Uuid, String, Option<BulkOutcome>, Option<String>)>,
}

/// Run `id` with every item, or `None`.
pub async fn progress(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<Progress>> {
    let Some(r) = runs::summary(pool, id).await? else {
        return Ok(None);
    };
    let items = runs::items(pool, id).await?;
    Ok(Some(Progress {
        id,
        author: r.author,
        action: r.action,
        reason: r.reason,
        rate_per_sec: r.rate_per_sec,
        created_at: r.created_at,
        finished_at: r.finished_at,
        stopped: r.stopped,
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
    filter: &crate::read::queue::QueueFilter,
    action: OperatorAction,
    role: Role,
    limit: i64,
) -> sqlx::Result<(Vec<PreviewRow>, bool)> {
    let mut rows = crate::read::queue::queue(pool, filter, None, limit + 1).await?;
    let more = rows.len() > usize::try_from(limit).unwrap_or(usize::MAX);
    rows.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    let mut conn = pool.acquire().await?;
    let mut preview = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(locked) = crate::store::action::read_facts(&mut conn, row.step_id).await? else {
            continue;
        };
        let refusal = match locked.decision_facts() {
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
