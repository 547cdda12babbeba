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

use super::admit::{admit_role, required};
use super::error::ActionError;
use super::{Done, audit};

/// Resolves an open duplicate-effect incident: `canonical` is the result that stands.
pub async fn resolve_incident(
    pool: &PgPool,
    operator: &Operator,
    incident: Uuid,
    canonical: &str,
    disposition: Disposition,
    reason: &str,
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
    admit_resolution(&row)?;
    let references = incident_resolution::references(&mut tx, incident).await?;
    if !references.iter().any(|r| r == canonical) {
        return Err(ActionError::Invalid(
            "The canonical result must be one of the incident's external references.".into(),
        ));
    }
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
                "disposition": disposition.recorded_as(), "withdrawal_steps": withdrawals }),
    )
    .await?;
    workflow::refresh_state(&mut tx, locked.workflow_id).await?;
    tx.commit().await?;
    Ok(Done {
        message: resolved_in_words(disposition, canonical, withdrawals.len()),
        step: row.step_id,
    })
}

/// Checks the incident is still open (the role was checked before any lock; there is no
/// page-version or lease check here).
fn admit_resolution(row: &LockedIncident) -> Result<(), ActionError> {
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
