//! Duplicate-effect incidents: an approver names the result that stands, and either asks the
//! destination to withdraw the others or accepts them as unresolved. Withdrawals (here and
//! after a cancelled success) run as compensation steps (docs/DESIGN.md §9).

use serde_json::json;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::domain::{Compensation, Disposition, EventKind, OperatorAction};
use crate::operators::Operator;
use crate::store::action::{self, StepFacts};
use crate::store::incident_resolution::{self, LockedIncident};
use crate::store::{compensation, step, workflow};

use super::admit::{admit_adapter, admit_role, required};
use super::error::ActionError;
use super::{Done, audit, four_eyes};
use crate::store::proposal::Proposal;

/// Resolves an open duplicate-effect incident: `canonical` is the result that stands. Accepting
/// the others as unresolved becomes a proposal where the adapter's file asks for four eyes on
/// `resolve_incident` (docs/DESIGN.md §20).
pub async fn resolve_incident(
    pool: &PgPool,
    operator: &Operator,
    incident: Uuid,
    canonical: &str,
    disposition: Disposition,
    reason: &str,
) -> Result<Done, ActionError> {
    resolve_with(
        pool,
        operator,
        (incident, canonical, disposition),
        reason,
        None,
    )
    .await
}

/// Carries out a proposal to resolve an incident, as its second approver.
pub(super) async fn resolve_confirmed(
    pool: &PgPool,
    operator: &Operator,
    proposal: &Proposal,
    reason: &str,
) -> Result<Done, ActionError> {
    let params = &proposal.params;
    let incident = params["incident"]
        .as_str()
        .and_then(|id| Uuid::parse_str(id).ok())
        .ok_or(ActionError::NotFound)?;
    let canonical = params["canonical"].as_str().unwrap_or_default();
    let resolving = (incident, canonical, Disposition::AcceptUnresolved);
    resolve_with(pool, operator, resolving, reason, Some(proposal)).await
}

async fn resolve_with(
    pool: &PgPool,
    operator: &Operator,
    (incident, canonical, disposition): (Uuid, &str, Disposition),
    reason: &str,
    confirming: Option<&Proposal>,
) -> Result<Done, ActionError> {
    let reason = required("A reason", reason, 2000)?;
    admit_role(operator.role, OperatorAction::ResolveIncident)?;
    let mut tx = pool.begin().await?;
    let Some(row) = incident_resolution::lock(&mut tx, incident).await? else {
        return Err(ActionError::NotFound);
    };
    let locked = action::lock_for_action(&mut tx, row.step_id)
        .await?
        .ok_or(ActionError::NotFound)?;
    admit_resolution(&row, &locked, operator)?;
    let references = incident_resolution::references(&mut tx, incident).await?;
    if !references.iter().any(|r| r == canonical) {
        return Err(ActionError::Invalid(
            "The canonical result must be one of the incident's external references.".into(),
        ));
    }
    let resolving = (incident, canonical, disposition, row.step_id);
    let four_eyes = match accepting(&mut tx, operator, &locked, resolving, confirming, &reason)
        .await?
    {
        Accepting::Take(confirmation) => confirmation,
        Accepting::Propose(p, expiry) => return four_eyes::propose(tx, p, &reason, expiry).await,
    };
    let withdrawals = match disposition {
        Disposition::Withdraw => {
            withdraw_others(
                &mut tx,
                &locked,
                row.step_id,
                incident,
                &references,
                canonical,
            )
            .await?
        }
        Disposition::AcceptUnresolved => Vec::new(),
    };
    incident_resolution::resolve(
        &mut tx,
        incident,
        canonical,
        disposition,
        &operator.username,
        &reason,
    )
    .await?;
    step::release_dependants(&mut tx, locked.workflow_id).await?;
    workflow::announce(
        &mut tx,
        locked.workflow_id,
        EventKind::IncidentResolved,
        &json!({ "incident": incident, "canonical": canonical, "disposition": disposition.recorded_as() }),
    )
    .await?;
    audit(
        &mut tx,
        operator.actor(),
        OperatorAction::ResolveIncident,
        &locked,
        row.step_id,
        &reason,
        json!({ "incident": incident, "kind": row.kind, "canonical": canonical,
                "disposition": disposition.recorded_as(), "withdrawal_steps": withdrawals,
                "four_eyes": four_eyes }),
    )
    .await?;
    workflow::refresh_state(&mut tx, locked.workflow_id).await?;
    tx.commit().await?;
    Ok(Done {
        message: resolved_in_words(disposition, canonical, withdrawals.len()),
        step: row.step_id,
    })
}

/// What four eyes says of a resolution.
enum Accepting<'a> {
    /// Take it; confirming a proposal, with what the audit entry records of it.
    Take(Option<serde_json::Value>),
    /// Propose it, to wait this long for a second approver.
    Propose(four_eyes::Proposing<'a>, std::time::Duration),
}

/// Accepting the incident's other effects as unresolved needs a second approver where the
/// adapter's file asks for four eyes on `resolve_incident`; withdrawing them never does.
async fn accepting<'a>(
    conn: &mut PgConnection,
    operator: &'a Operator,
    locked: &'a StepFacts,
    (incident, canonical, disposition, step): (Uuid, &str, Disposition, Uuid),
    confirming: Option<&Proposal>,
    reason: &str,
) -> Result<Accepting<'a>, ActionError> {
    if disposition == Disposition::Withdraw {
        return Ok(Accepting::Take(None));
    }
    let acting = (operator, locked, OperatorAction::ResolveIncident);
    Ok(
        match four_eyes::gate(conn, acting, confirming, reason).await? {
            four_eyes::Gate::Take(confirmation) => Accepting::Take(confirmation),
            four_eyes::Gate::Propose(expiry) => {
                let params = json!({ "incident": incident, "canonical": canonical,
                                 "disposition": disposition.recorded_as() });
                let kind = OperatorAction::ResolveIncident;
                let p = four_eyes::Proposing {
                    operator,
                    step,
                    locked,
                    kind,
                    params,
                };
                Accepting::Propose(p, expiry)
            }
        },
    )
}

/// Checks that a token may use the step's adapter and that the incident is still open (the
/// role was checked before any lock; there is no page-version or lease check here).
fn admit_resolution(
    row: &LockedIncident,
    locked: &StepFacts,
    operator: &Operator,
) -> Result<(), ActionError> {
    admit_adapter(locked, operator, OperatorAction::ResolveIncident)?;
    if row.resolved {
        return Err(ActionError::Conflict(
            "This incident was resolved already; nothing was done.".into(),
        ));
    }
    Ok(())
}

/// Requests withdrawal of every reference but `canonical`, if the adapter can withdraw a
/// delivery; returns the compensation steps, in the order of `references`.
async fn withdraw_others(
    conn: &mut PgConnection,
    locked: &StepFacts,
    step: Uuid,
    incident: Uuid,
    references: &[String],
    canonical: &str,
) -> Result<Vec<Uuid>, ActionError> {
    let withdrawable = locked
        .contract
        .as_ref()
        .is_some_and(|c| matches!(c.compensation, Compensation::SupportedWithLimits(_)));
    if !withdrawable {
        return Err(ActionError::NotPermitted(
            "This adapter cannot withdraw an effect; accept the duplicate as unresolved instead."
                .into(),
        ));
    }
    let mut withdrawals = Vec::new();
    for duplicate in references.iter().filter(|r| *r != canonical) {
        withdrawals.push(request_withdrawal(conn, step, duplicate, Some(incident)).await?);
    }
    Ok(withdrawals)
}

fn resolved_in_words(disposition: Disposition, canonical: &str, withdrawals: usize) -> String {
    match disposition {
        Disposition::Withdraw => format!(
            "Resolved: {canonical} stands; withdrawal of {withdrawals} duplicate(s) requested."
        ),
        Disposition::AcceptUnresolved => {
            format!("Resolved: {canonical} stands; the duplicate is accepted as unresolved.")
        }
    }
}

/// Creates a compensation step that asks the destination to withdraw `reference` under its
/// own request key; it runs, and may end unknown, like any external step.
pub async fn request_withdrawal(
    conn: &mut PgConnection,
    original: Uuid,
    reference: &str,
    incident: Option<Uuid>,
) -> sqlx::Result<Uuid> {
    let id = Uuid::now_v7();
    compensation::insert_withdrawal_step(&mut *conn, id, original).await?;
    compensation::link(conn, id, original, reference, incident).await?;
    Ok(id)
}
