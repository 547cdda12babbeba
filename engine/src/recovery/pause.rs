//! Pausing and resuming a workflow (docs/DESIGN.md §20): an operator stops every step of one
//! workflow from starting — its ready steps wait held at once, and those that become ready
//! later are held when claimed — while calls in flight settle as they would; resuming sends
//! its held steps back to the queue. Both are audited on the workflow with the reason.

use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use super::ActionError;
use super::admit::admit_control;
use crate::domain::{AuditAction, Role};
use crate::operators::Operator;
use crate::store::conclusion::lock_workflows;
use crate::store::held::{self, Releasing};
use crate::store::journal::{self, AuditEntry};
use crate::store::pause::{self, Pausing, WorkflowPause};

/// What pausing or resuming did.
#[derive(Debug, Clone, PartialEq)]
pub struct Paused {
    /// The pause begun, or the one resuming ended.
    pub pause: WorkflowPause,
    /// How many steps it held, or released.
    pub steps: usize,
    pub message: String,
}

/// Refuses to `what` a workflow with a step of an adapter a token made with `--adapters` may
/// not use: pausing and resuming hold and release every step of it.
async fn within_adapters(
    conn: &mut sqlx::PgConnection,
    operator: &Operator,
    workflow: Uuid,
    what: &str,
) -> Result<(), ActionError> {
    if operator.adapters.is_none() {
        return Ok(());
    }
    let adapters = crate::store::step::adapters_of_workflow(conn, workflow).await?;
    match adapters.iter().find(|a| !operator.may_use(a)) {
        None => Ok(()),
        Some(outside) => Err(ActionError::Forbidden(format!(
            "This workflow has a step of adapter `{outside}`, which `{}` may not use: it cannot {what} it.",
            operator.username
        ))),
    }
}

/// Pauses `workflow`: no step of it starts until it is resumed. An operator or an approver
/// may pause, with a reason; a completed or cancelled workflow has nothing left to pause.
pub async fn pause_workflow(
    pool: &PgPool,
    operator: &Operator,
    workflow: Uuid,
    reason: &str,
) -> Result<Paused, ActionError> {
    let reason = admit_control(operator.role, Role::Operator, "Pausing a workflow", reason)?;
    let mut tx = pool.begin().await?;
    lock_workflows(&mut tx, &[workflow]).await?;
    within_adapters(&mut tx, operator, workflow, "pause").await?;
    let pause = match pause::pause(&mut tx, workflow, &operator.actor().label(), &reason).await? {
        Pausing::Paused(pause) => pause,
        Pausing::Already(standing) => {
            return Err(ActionError::Conflict(format!(
                "This workflow is paused already, by {} since {}: {}",
                standing.paused_by,
                standing.paused_at.format("%Y-%m-%d %H:%M UTC"),
                standing.reason
            )));
        }
        Pausing::Settled(state) => {
            return Err(ActionError::Conflict(format!(
                "This workflow is {}: nothing of it is left to pause.",
                state.label().to_lowercase()
            )));
        }
        Pausing::Unknown => return Err(ActionError::NotFound),
    };
    let steps = hold_paused(&mut tx, operator, workflow, &reason).await?;
    tx.commit().await?;
    Ok(Paused {
        pause,
        steps,
        message: format!(
            "Paused: no step of this workflow starts until it is resumed ({steps} held now; calls in flight settle)."
        ),
    })
}

/// The most workflows one bulk pause takes.
pub const MAX_PAUSED_AT_ONCE: usize = 1_000;

/// What a bulk pause did.
#[derive(Debug, Clone, PartialEq)]
pub struct PausedMany {
    /// The workflows paused now.
    pub paused: Vec<Uuid>,
    /// Workflows left as they were: paused already, completed or cancelled, or unknown.
    pub left: usize,
    /// How many ready steps they held.
    pub steps: usize,
    pub message: String,
}

/// Pauses each of `workflows` that is neither settled nor paused already, in one transaction:
/// a bulk pause over the rows a person or a program listed (docs/DESIGN.md §20). Each pause is
/// audited on its workflow, as one alone would be.
pub async fn pause_workflows(
    pool: &PgPool,
    operator: &Operator,
    workflows: &[Uuid],
    reason: &str,
) -> Result<PausedMany, ActionError> {
    let reason = admit_control(operator.role, Role::Operator, "Pausing workflows", reason)?;
    if workflows.is_empty() || workflows.len() > MAX_PAUSED_AT_ONCE {
        return Err(ActionError::Invalid(format!(
            "A bulk pause takes between 1 and {MAX_PAUSED_AT_ONCE} workflows; {} were named.",
            workflows.len()
        )));
    }
    let mut ids = workflows.to_vec();
    ids.sort();
    ids.dedup();
    let mut tx = pool.begin().await?;
    lock_workflows(&mut tx, &ids).await?;
    let (mut paused, mut steps) = (Vec::new(), 0);
    for &workflow in &ids {
        within_adapters(&mut tx, operator, workflow, "pause").await?;
        let by = operator.actor().label();
        if let Pausing::Paused(_) = pause::pause(&mut tx, workflow, &by, &reason).await? {
            steps += hold_paused(&mut tx, operator, workflow, &reason).await?;
            paused.push(workflow);
        }
    }
    tx.commit().await?;
    let left = ids.len() - paused.len();
    Ok(PausedMany {
        message: format!(
            "Paused {} workflow(s): no step of them starts until each is resumed ({steps} held now; calls in flight settle). {left} left as they were (paused already, settled or unknown).",
            paused.len()
        ),
        paused,
        left,
        steps,
    })
}

/// Resumes `workflow`: its held steps go back to the queue (those whose adapter is held or
/// unverified stay held). An operator or an approver may resume, with a reason.
pub async fn resume_workflow(
    pool: &PgPool,
    operator: &Operator,
    workflow: Uuid,
    reason: &str,
) -> Result<Paused, ActionError> {
    let reason = admit_control(operator.role, Role::Operator, "Resuming a workflow", reason)?;
    let mut tx = pool.begin().await?;
    lock_workflows(&mut tx, &[workflow]).await?;
    within_adapters(&mut tx, operator, workflow, "resume").await?;
    let Some(pause) = pause::resume(&mut tx, workflow).await? else {
        return Err(
            match crate::store::workflow::by_id(&mut *tx, workflow).await? {
                None => ActionError::NotFound,
                Some(_) => ActionError::Conflict("This workflow is not paused.".into()),
            },
        );
    };
    let steps = held::release(&mut tx, Releasing::Workflow(workflow), None).await?;
    audit(
        &mut tx,
        operator,
        AuditAction::WorkflowResume,
        workflow,
        &reason,
        steps,
    )
    .await?;
    tx.commit().await?;
    Ok(Paused {
        pause,
        steps,
        message: format!("Resumed: {steps} held steps went back to the queue."),
    })
}

/// What pausing `workflow` does once its row says so: its ready steps wait held at once, and
/// the pause is audited on it. Returns how many steps it held.
async fn hold_paused(
    conn: &mut sqlx::PgConnection,
    operator: &Operator,
    workflow: Uuid,
    reason: &str,
) -> sqlx::Result<usize> {
    let ready = held::ready_of(&mut *conn, workflow).await?;
    let steps = held::hold(&mut *conn, &ready).await?;
    audit(
        conn,
        operator,
        AuditAction::WorkflowPause,
        workflow,
        reason,
        steps,
    )
    .await?;
    Ok(steps)
}

async fn audit(
    conn: &mut sqlx::PgConnection,
    operator: &Operator,
    action: AuditAction,
    workflow: Uuid,
    reason: &str,
    steps: usize,
) -> sqlx::Result<()> {
    let entry = AuditEntry {
        actor: operator.actor(),
        action,
        workflow: Some(workflow),
        step: None,
        reason: Some(reason),
        details: json!({ "steps": steps }),
    };
    journal::audit(conn, &entry).await
}
