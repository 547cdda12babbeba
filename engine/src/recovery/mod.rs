//! The human path of recovery: what people do to steps the engine could not settle by itself.
//!
//! Every action locks the step row, then decides again, inside that transaction, whether the
//! operator's role and the adapter's contract permit it ([`crate::domain::refusal`], the same
//! function that drew the page), whether the page the operator acted from is still current,
//! and whether a worker holds the step right now. Only then does it change anything, and the
//! audit entry commits with the change. A stale page, a second operator or a forged request
//! gets a refusal in words and changes nothing (docs/DESIGN.md §7).
//!
//! [`perform`] takes one action on one step; [`incident`] resolves duplicate-effect
//! incidents; [`replace`] creates replacement steps; [`bulk`] performs one action over the
//! rows a person previewed.

mod admit;
pub mod bulk;
pub mod cancel;
mod check;
pub mod error;
pub mod four_eyes;
pub mod hold;
pub mod incident;
pub mod limit;
pub mod note;
pub mod pause;
pub mod replace;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use uuid::Uuid;

use crate::domain::{EventKind, OperatorAction, ReceiptMethod, RequestKey, StepState};
use crate::operators::Operator;
use crate::store::action::{self, StepFacts};
use crate::store::journal::{self, Actor, AuditEntry};
use crate::store::proposal::Proposal;
use crate::store::receipt::{NewReceipt, ReceiptOutcome, commit_receipt};
use crate::store::{authorization, step, waiver, workflow};

use admit::{admit, admit_role, required};
pub use error::ActionError;

/// What the operator asked for, with what that action needs besides a reason.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    CheckDestination,
    RetrySameKey,
    AttachEvidence {
        external_reference: String,
        evidence: String,
    },
    Waive {
        residual_uncertainty: String,
    },
    AuthorizeAnotherAttempt {
        acknowledged_duplicate_risk: bool,
    },
    Cancel,
    /// `corrected_input` replaces the workflow's input for the new step (`None`: the same input).
    Replace {
        corrected_input: Option<Value>,
    },
}

impl Action {
    /// The decision table's name for this action.
    pub fn kind(&self) -> OperatorAction {
        match self {
            Action::CheckDestination => OperatorAction::CheckDestination,
            Action::RetrySameKey => OperatorAction::RetrySameKey,
            Action::AttachEvidence { .. } => OperatorAction::AttachEvidence,
            Action::Waive { .. } => OperatorAction::Waive,
            Action::AuthorizeAnotherAttempt { .. } => OperatorAction::AuthorizeAnotherAttempt,
            Action::Cancel => OperatorAction::Cancel,
            Action::Replace { .. } => OperatorAction::Replace,
        }
    }
}

/// One request to act on a step.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub operator: &'a Operator,
    pub step: Uuid,
    /// The step's version on the page the operator acted from; `None` skips the staleness
    /// check (the CLI and bulk recovery, which re-read the row they act on).
    pub seen_version: Option<i64>,
    pub reason: &'a str,
    pub action: Action,
}

/// What an action did, in words, and where the operator should look next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub message: String,
    /// The step to show next (a replacement opens on the new step).
    pub step: Uuid,
}

/// What an action arm did: the message, the audit entry's details, the step to show next.
type Outcome = (String, Value, Uuid);

/// Performs `request` if the operator's role and the contract permit it now.
pub async fn perform(pool: &PgPool, request: Request<'_>) -> Result<Done, ActionError> {
    perform_at(pool, request, None).await
}

/// [`perform`], with *Check destination* judging the visibility window at `now` instead of the
/// database's clock: how tests pass the time rather than wait for it.
pub async fn perform_at(
    pool: &PgPool,
    request: Request<'_>,
    now: Option<DateTime<Utc>>,
) -> Result<Done, ActionError> {
    perform_with(pool, request, now, None).await
}

/// [`perform`] as the second approver of `proposal` (`four_eyes::confirm`).
async fn perform_confirmed(
    pool: &PgPool,
    request: Request<'_>,
    proposal: &Proposal,
) -> Result<Done, ActionError> {
    perform_with(pool, request, None, Some(proposal)).await
}

/// A proposal to resolve an incident, carried out by its second approver.
async fn resolve_incident_confirmed(
    pool: &PgPool,
    operator: &Operator,
    proposal: &Proposal,
    reason: &str,
) -> Result<Done, ActionError> {
    incident::resolve_confirmed(pool, operator, proposal, reason).await
}

/// [`perform_at`]; an action that needs two approvers (docs/DESIGN.md §20) becomes a proposal
/// unless it confirms one.
async fn perform_with(
    pool: &PgPool,
    request: Request<'_>,
    now: Option<DateTime<Utc>>,
    confirming: Option<&Proposal>,
) -> Result<Done, ActionError> {
    let reason = required("A reason", request.reason, 2000)?;
    let kind = request.action.kind();
    admit_role(request.operator.role, kind)?;
    let mut tx = pool.begin().await?;
    let locked = action::lock_for_action(&mut tx, request.step)
        .await?
        .ok_or(ActionError::NotFound)?;
    admit(&locked, request.operator, kind, request.seen_version)?;
    let gate = four_eyes::gate(
        &mut tx,
        (request.operator, &locked, kind),
        confirming,
        &reason,
    );
    let four_eyes = match gate.await? {
        four_eyes::Gate::Propose(expiry) => {
            let proposing = four_eyes::Proposing {
                operator: request.operator,
                step: request.step,
                locked: &locked,
                kind,
                params: four_eyes::params_of(&request.action)?,
            };
            return four_eyes::propose(tx, proposing, &reason, expiry).await;
        }
        four_eyes::Gate::Take(confirmation) => confirmation,
    };
    if request.action == Action::CheckDestination {
        return check_destination(pool, tx, &request, &locked, &reason, now).await;
    }
    let actor = request.operator.actor();
    let proposal = confirming.map(|p| p.id);
    let (message, mut details, next_step) =
        take(&mut tx, &request, &locked, &reason, proposal).await?;
    if let Some(confirmation) = four_eyes {
        details["four_eyes"] = confirmation;
    }
    audit(
        &mut tx,
        actor,
        kind,
        &locked,
        request.step,
        &reason,
        details,
    )
    .await?;
    workflow::refresh_state(&mut tx, locked.workflow_id).await?;
    tx.commit().await?;
    Ok(Done {
        message,
        step: next_step,
    })
}

/// Takes the action of `request` on the locked step, inside the action's transaction; a
/// waiver or authorization names the `proposal` it carries out.
async fn take(
    conn: &mut PgConnection,
    request: &Request<'_>,
    locked: &StepFacts,
    reason: &str,
    proposal: Option<Uuid>,
) -> Result<Outcome, ActionError> {
    Ok(match &request.action {
        Action::CheckDestination => unreachable!("checked before, outside this transaction"),
        Action::RetrySameKey => retry_same_key(conn, locked, request.step).await?,
        Action::AttachEvidence {
            external_reference,
            evidence,
        } => attach_evidence(conn, request, locked, reason, external_reference, evidence).await?,
        Action::Waive {
            residual_uncertainty,
        } => {
            let waiving = (residual_uncertainty.as_str(), proposal);
            waive(conn, request, locked, reason, waiving).await?
        }
        Action::AuthorizeAnotherAttempt {
            acknowledged_duplicate_risk,
        } => {
            let acknowledged = (*acknowledged_duplicate_risk, proposal);
            authorize_another_attempt(conn, request, reason, acknowledged).await?
        }
        Action::Cancel => cancel(conn, locked, request.step).await?,
        Action::Replace { corrected_input } => {
            replace_with_corrected_input(conn, locked, request.step, corrected_input.as_ref())
                .await?
        }
    })
}

/// *Check destination*: audits and commits, then asks the destination.
async fn check_destination(
    pool: &PgPool,
    mut tx: Transaction<'_, Postgres>,
    request: &Request<'_>,
    locked: &StepFacts,
    reason: &str,
    now: Option<DateTime<Utc>>,
) -> Result<Done, ActionError> {
    // The lookup is a network call: the step is leased to this operator for it, so
    // no worker or second operator acts meanwhile, and the lookup runs after commit.
    let holder = format!("console:{}", request.operator.username);
    audit(
        &mut tx,
        request.operator.actor(),
        request.action.kind(),
        locked,
        request.step,
        reason,
        json!({}),
    )
    .await?;
    tx.commit().await?;
    check::check_destination(pool, locked, request.step, &holder, now).await
}

/// *Retry with the same key*: the next attempt reuses the step's request key.
async fn retry_same_key(
    conn: &mut PgConnection,
    locked: &StepFacts,
    step: Uuid,
) -> Result<Outcome, ActionError> {
    action::to_ready(conn, step).await?;
    Ok((
        format!(
            "A new attempt will be sent under the same request key {}.",
            locked.request_key.as_deref().unwrap_or("—")
        ),
        json!({ "request_key": locked.request_key }),
        step,
    ))
}

/// *Attach evidence*: a receipt from an external reference the operator found by other means.
async fn attach_evidence(
    conn: &mut PgConnection,
    request: &Request<'_>,
    locked: &StepFacts,
    reason: &str,
    external_reference: &str,
    evidence: &str,
) -> Result<Outcome, ActionError> {
    let external_reference = required("The external reference", external_reference, 200)?;
    let evidence = required("Evidence", evidence, 4000)?;
    let key = locked.request_key.as_deref().unwrap_or_default();
    if !locked.request_bound {
        bind_restored_request(conn, request.step, locked).await?;
    }
    let receipt = NewReceipt {
        step: request.step,
        request_key: key,
        external_reference: &external_reference,
        completion_state: "accepted",
        method: ReceiptMethod::ManualEvidence,
        result_summary: &json!({ "attached_by": request.operator.username }),
        author: Some(&request.operator.username),
        evidence: Some(&evidence),
        reason: Some(reason),
    };
    match commit_receipt(conn, None, &receipt).await? {
        ReceiptOutcome::Committed { .. } => {
            step::release_dependants(conn, locked.workflow_id).await?;
        }
        ReceiptOutcome::AlreadyRecorded | ReceiptOutcome::Duplicate { .. } => {
            return Err(ActionError::Conflict(
                "This step has a receipt already; nothing was attached.".into(),
            ));
        }
    }
    workflow::announce(
        conn,
        locked.workflow_id,
        EventKind::StepVerified,
        &json!({
            "step": request.step, "external_reference": external_reference,
            "method": ReceiptMethod::ManualEvidence, "logical": locked.logical, "adapter": locked.adapter,
        }),
    )
    .await?;
    Ok((
        format!("Receipt recorded from manual evidence: external reference {external_reference}."),
        json!({ "external_reference": external_reference, "evidence": evidence }),
        request.step,
    ))
}

/// A step restored from a backup taken before its call has no persisted request identity;
/// evidence of the delivery the live system made names the regenerated request, bound now.
/// Regeneration reads the step row this action has locked, so it needs no lease; the receipt
/// committed in the same transaction settles the step.
async fn bind_restored_request(
    conn: &mut PgConnection,
    step_id: Uuid,
    locked: &StepFacts,
) -> Result<(), ActionError> {
    let key = RequestKey::from(locked.request_key.clone().unwrap_or_default());
    let adapters = crate::adapter::registry::Adapters::load(&mut *conn).await?;
    let name = locked.adapter.as_deref().unwrap_or_default();
    let (adapter, _) = adapters.get(name).ok_or_else(|| {
        ActionError::Conflict(format!(
            "Adapter `{name}` is no longer registered, so the request cannot be regenerated."
        ))
    })?;
    crate::worker::bind_regenerated_for(
        conn,
        step_id,
        &key,
        adapter.as_ref(),
        locked.contract_version.unwrap_or(0),
    )
    .await?;
    Ok(())
}

/// *Waive*: the step counts as done, with its residual uncertainty named and recorded.
async fn waive(
    conn: &mut PgConnection,
    request: &Request<'_>,
    locked: &StepFacts,
    reason: &str,
    (residual_uncertainty, proposal): (&str, Option<Uuid>),
) -> Result<Outcome, ActionError> {
    let residual = required("The residual uncertainty", residual_uncertainty, 2000)?;
    let step = request.step;
    let id = Uuid::now_v7();
    let author = &request.operator.username;
    waiver::insert(conn, id, step, (author, reason, &residual), proposal).await?;
    waiver::mark_step_waived(conn, step, id).await?;
    step::release_dependants(conn, locked.workflow_id).await?;
    workflow::announce(
        conn,
        locked.workflow_id,
        EventKind::StepWaived,
        &json!({
            "step": step, "residual_uncertainty": residual,
            "logical": locked.logical, "adapter": locked.adapter,
        }),
    )
    .await?;
    Ok((
        format!("Step waived. Residual uncertainty recorded: {residual}"),
        json!({ "residual_uncertainty": residual }),
        step,
    ))
}

/// *Authorize another attempt*: one more attempt under an adapter that cannot prove the first
/// one's outcome, carrying the approver's acknowledgement of the duplicate risk.
async fn authorize_another_attempt(
    conn: &mut PgConnection,
    request: &Request<'_>,
    reason: &str,
    (acknowledged_duplicate_risk, proposal): (bool, Option<Uuid>),
) -> Result<Outcome, ActionError> {
    if !acknowledged_duplicate_risk {
        return Err(ActionError::Invalid(
            "Another attempt under an adapter that cannot prove the first one's outcome may make the effect twice; acknowledge that risk to authorize it.".into(),
        ));
    }
    let id = Uuid::now_v7();
    let author = &request.operator.username;
    authorization::insert(conn, id, request.step, (author, reason), proposal).await?;
    action::to_ready(conn, request.step).await?;
    Ok((
        "Another attempt is authorized; it will carry your authorization, and a second effect is possible.".into(),
        json!({ "authorization": id, "acknowledged_duplicate_risk": true }),
        request.step,
    ))
}

/// Cancel, by state: before the call it prevents the effect; during an unknown outcome it
/// stops future work (the effect may still have happened); after a receipt it requests
/// withdrawal through a compensation step.
async fn cancel(
    conn: &mut PgConnection,
    locked: &StepFacts,
    step: Uuid,
) -> Result<Outcome, ActionError> {
    if locked.state == StepState::Succeeded {
        let reference = locked.receipt_reference.clone().unwrap_or_default();
        let compensation = incident::request_withdrawal(conn, step, &reference, None).await?;
        return Ok((
            format!(
                "Withdrawal of {reference} requested; it runs as its own step with its own key and receipt."
            ),
            json!({ "withdrawal_step": compensation, "external_reference": reference }),
            compensation,
        ));
    }
    // This step and the work after it that has not started.
    let stopped = action::cancel_with_unstarted(conn, step, locked.workflow_id).await?;
    workflow::announce(
        conn,
        locked.workflow_id,
        EventKind::StepCancelled,
        &json!({ "step": step, "also_stopped": stopped.len().saturating_sub(1) }),
    )
    .await?;
    let message = if matches!(locked.state, StepState::Blocked | StepState::Ready) {
        "Cancelled before any call: the effect will not happen.".to_owned()
    } else {
        "Cancelled: no further attempt or recovery will run. The first attempt's effect may still have happened.".to_owned()
    };
    Ok((message, json!({ "stopped": stopped }), step))
}

/// *Replace with corrected input*: a new step under a new request key; the page opens on it.
async fn replace_with_corrected_input(
    conn: &mut PgConnection,
    locked: &StepFacts,
    step: Uuid,
    corrected_input: Option<&Value>,
) -> Result<Outcome, ActionError> {
    let (replacement, details) =
        replace::create_replacement(conn, locked, step, corrected_input).await?;
    Ok((
        format!(
            "Replacement step created under the new request key {}.",
            details["new_key"].as_str().unwrap_or_default()
        ),
        details,
        replacement,
    ))
}

/// The audit entry of an action on the locked step (an operator action, or a proposal's).
async fn audit(
    conn: &mut PgConnection,
    actor: Actor<'_>,
    action: impl Into<crate::domain::AuditAction>,
    locked: &StepFacts,
    step: Uuid,
    reason: &str,
    details: Value,
) -> sqlx::Result<()> {
    journal::audit(
        conn,
        &AuditEntry {
            actor,
            action: action.into(),
            workflow: Some(locked.workflow_id),
            step: Some(step),
            reason: Some(reason),
            details,
        },
    )
    .await
}
