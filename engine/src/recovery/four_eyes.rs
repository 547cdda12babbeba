//! Four eyes where money moves (docs/DESIGN.md §20). An adapter file may declare that waiving
//! its steps, or authorizing another attempt of them, needs two approvers. The first approver's
//! action becomes a proposal, with their reason; a *different* person confirms it — the action
//! is then taken in the confirmer's name, and its waiver or authorization names the proposal —
//! or declines it, before it expires. A token issued to a person counts as that person, so
//! nobody confirms their own proposal through a token of their own.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use uuid::Uuid;

use super::admit::required;
use super::{Action, ActionError, Done, Request, audit};
use crate::domain::{AuditAction, OperatorAction, Role};
use crate::operators::{Operator, Via};
use crate::store::action::{self, StepFacts};
use crate::store::proposal::{self, NewProposal, Proposal};

/// What four eyes says of an action about to be taken.
pub(super) enum Gate {
    /// It needs two approvers: propose it, to wait this long.
    Propose(Duration),
    /// Take it; confirming a proposal, with what the audit entry records of it.
    Take(Option<Value>),
}

/// Whether `operator` takes `kind` on the locked step now: as the second approver of
/// `confirming` (checked again under its lock), as one approver when the adapter's file does not
/// ask for two, or not yet — it becomes a proposal.
pub(super) async fn gate(
    conn: &mut PgConnection,
    (operator, locked, kind): (&Operator, &StepFacts, OperatorAction),
    confirming: Option<&Proposal>,
    reason: &str,
) -> Result<Gate, ActionError> {
    Ok(match confirming {
        Some(p) => Gate::Take(Some(settle_confirmation(conn, operator, p, reason).await?)),
        None => match rule_for(conn, locked, kind).await? {
            Some(expiry) => Gate::Propose(expiry),
            None => Gate::Take(None),
        },
    })
}

/// How long a proposal for `kind` on the locked step waits, when its adapter's current file
/// says `kind` needs two approvers.
async fn rule_for(
    conn: &mut PgConnection,
    locked: &StepFacts,
    kind: OperatorAction,
) -> Result<Option<Duration>, ActionError> {
    let Some(name) = locked.adapter.as_deref() else {
        return Ok(None);
    };
    Ok(crate::adapter::apply::four_eyes_of(&mut *conn, name)
        .await?
        .filter(|rule| rule.actions.contains(&kind))
        .map(|rule| rule.expires_after.0))
}

/// The person behind `operator`: the account, or the person a token was issued to. A token
/// issued to nobody stands for no person, and two approvals need two: whoever holds it (a
/// team's chat button, say) could confirm what they proposed in the console.
async fn person(conn: &mut PgConnection, operator: &Operator) -> Result<String, ActionError> {
    match operator.via {
        Via::Console | Via::Cli => Ok(operator.username.clone()),
        Via::Token => proposal::token_person(&mut *conn, operator.id)
            .await?
            .ok_or_else(|| {
                ActionError::Forbidden(format!(
                    "Token `{}` was issued to nobody, and an action two approvers must agree on is proposed and decided by people: use a token made with `z29c token create NAME --for USERNAME`.",
                    operator.username
                ))
            }),
    }
}

/// An action about to become a proposal: who, on which locked step, what it carries.
pub(super) struct Proposing<'a> {
    pub operator: &'a Operator,
    pub step: Uuid,
    pub locked: &'a StepFacts,
    pub kind: OperatorAction,
    pub params: Value,
}

/// Records an action as a proposal instead of taking it; audited as `propose` on the step.
pub(super) async fn propose(
    mut tx: Transaction<'_, Postgres>,
    p: Proposing<'_>,
    reason: &str,
    expires_after: Duration,
) -> Result<Done, ActionError> {
    let proposed_by = person(&mut tx, p.operator).await?;
    let proposed_as = p.operator.actor().label();
    let new = NewProposal {
        step: p.step,
        action: p.kind,
        params: &p.params,
        proposed_by: &proposed_by,
        proposed_as: &proposed_as,
        reason,
        step_version: p.locked.version,
        expires_after_secs: expires_after.as_secs_f64(),
    };
    let Some(made) = proposal::propose(&mut tx, &new).await? else {
        let standing = proposal::waiting(&mut *tx, p.step).await?;
        let by = standing.map(|w| format!(" by {}: {}", w.proposed_by, w.reason));
        return Err(ActionError::Conflict(format!(
            "A proposal waits on this step already{}; confirm or decline it first.",
            by.unwrap_or_default()
        )));
    };
    let details = json!({
        "proposal": made.id, "action": made.action.name(), "params": p.params,
        "expires_at": made.expires_at,
    });
    let actor = p.operator.actor();
    audit(
        &mut tx,
        actor,
        AuditAction::Propose,
        p.locked,
        p.step,
        reason,
        details,
    )
    .await?;
    tx.commit().await?;
    Ok(Done {
        message: format!(
            "Proposed: {} needs a second approver, who must confirm it on the step's page by {}.",
            made.action.label(),
            made.expires_at.format("%Y-%m-%d %H:%M UTC")
        ),
        step: p.step,
    })
}

/// What the proposed action needs besides a reason, checked as the action itself would.
pub(super) fn params_of(action: &Action) -> Result<Value, ActionError> {
    Ok(match action {
        Action::Waive {
            residual_uncertainty,
        } => {
            let residual = required("The residual uncertainty", residual_uncertainty, 2000)?;
            json!({ "residual_uncertainty": residual })
        }
        Action::AuthorizeAnotherAttempt {
            acknowledged_duplicate_risk: true,
        } => json!({ "acknowledged_duplicate_risk": true }),
        Action::AuthorizeAnotherAttempt { .. } => {
            return Err(ActionError::Invalid(
                "Another attempt may make the effect twice; acknowledge that risk to propose it."
                    .into(),
            ));
        }
        other => {
            return Err(ActionError::Invalid(format!(
                "{} does not need two approvers.",
                other.kind().label()
            )));
        }
    })
}

/// The action a proposal carries out.
fn action_of(proposal: &Proposal) -> Action {
    match proposal.action {
        OperatorAction::Waive => Action::Waive {
            residual_uncertainty: proposal.params["residual_uncertainty"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        },
        _ => Action::AuthorizeAnotherAttempt {
            acknowledged_duplicate_risk: true,
        },
    }
}

/// Confirms proposal `id` as `operator`, with their reason: a different approver, before it
/// expires, on a step that has not moved since; the action is then taken in their name.
pub async fn confirm(
    pool: &PgPool,
    operator: &Operator,
    id: Uuid,
    reason: &str,
) -> Result<Done, ActionError> {
    let (proposal, _) = admitted(pool, operator, id, "Confirming").await?;
    if proposal.action == OperatorAction::ResolveIncident {
        return super::resolve_incident_confirmed(pool, operator, &proposal, reason).await;
    }
    let request = Request {
        operator,
        step: proposal.step,
        seen_version: Some(proposal.step_version),
        reason,
        action: action_of(&proposal),
    };
    super::perform_confirmed(pool, request, &proposal).await
}

/// Declines proposal `id` as `operator`, with their reason: nothing is done to the step.
pub async fn decline(
    pool: &PgPool,
    operator: &Operator,
    id: Uuid,
    reason: &str,
) -> Result<Done, ActionError> {
    let reason = required("A reason", reason, 2000)?;
    let (proposal, decider) = admitted(pool, operator, id, "Declining").await?;
    let mut tx = pool.begin().await?;
    let locked = action::lock_for_action(&mut tx, proposal.step)
        .await?
        .ok_or(ActionError::NotFound)?;
    proposal::lock(&mut tx, id).await?;
    proposal::decide(
        &mut tx,
        id,
        "declined",
        &decider,
        &operator.actor().label(),
        &reason,
    )
    .await?;
    let details = json!({ "proposal": id, "action": proposal.action.name(), "proposed_by": proposal.proposed_by });
    let (actor, action) = (operator.actor(), AuditAction::DeclineProposal);
    audit(
        &mut tx,
        actor,
        action,
        &locked,
        proposal.step,
        &reason,
        details,
    )
    .await?;
    tx.commit().await?;
    Ok(Done {
        message: format!(
            "Declined {}'s proposal to {}; nothing was done to the step.",
            proposal.proposed_by,
            proposal.action.label().to_lowercase()
        ),
        step: proposal.step,
    })
}

/// Proposal `id` as a second person may decide it: it waits, has not expired, and `operator`
/// is an approver other than its proposer. Returns it with the deciding person.
async fn admitted(
    pool: &PgPool,
    operator: &Operator,
    id: Uuid,
    doing: &str,
) -> Result<(Proposal, String), ActionError> {
    if operator.role < Role::Approver {
        return Err(ActionError::Forbidden(format!(
            "{doing} a proposal needs the approver role."
        )));
    }
    let mut conn = pool.acquire().await?;
    let proposal = proposal::lock(&mut conn, id)
        .await?
        .ok_or(ActionError::NotFound)?;
    if let Some(decision) = &proposal.decision {
        return Err(ActionError::Conflict(format!(
            "This proposal was {decision} already."
        )));
    }
    if proposal.expires_at <= chrono::Utc::now() {
        return Err(ActionError::Conflict(format!(
            "This proposal expired at {}; propose the action again.",
            proposal.expires_at.format("%Y-%m-%d %H:%M UTC")
        )));
    }
    let decider = person(&mut conn, operator).await?;
    if decider == proposal.proposed_by {
        return Err(ActionError::Forbidden(format!(
            "{} proposed this; a different approver must decide it.",
            proposal.proposed_by
        )));
    }
    Ok((proposal, decider))
}

/// Inside the confirming transaction: checks the proposal again under its lock and records
/// the confirmation; the caller takes the action and links its waiver or authorization.
async fn settle_confirmation(
    conn: &mut PgConnection,
    operator: &Operator,
    confirmed: &Proposal,
    reason: &str,
) -> Result<Value, ActionError> {
    let now = proposal::lock(&mut *conn, confirmed.id)
        .await?
        .ok_or(ActionError::NotFound)?;
    let decider = person(conn, operator).await?;
    if now.decision.is_some() || now.expires_at <= chrono::Utc::now() || decider == now.proposed_by
    {
        return Err(ActionError::Conflict(
            "This proposal was decided or expired meanwhile.".into(),
        ));
    }
    proposal::decide(
        conn,
        now.id,
        "confirmed",
        &decider,
        &operator.actor().label(),
        reason,
    )
    .await?;
    Ok(json!({
        "proposal": now.id, "proposed_by": now.proposed_by, "proposed_as": now.proposed_as,
        "proposal_reason": now.reason, "confirmed_by": decider,
    }))
}
