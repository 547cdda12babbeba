//! Holding and resuming an adapter (docs/DESIGN.md §20): during a provider's outage an approver
//! stops new requests to it from every worker, and resumes them later at a ramp. Both are
//! audited with the reason; each step held and released is announced on its workflow.

use serde_json::json;
use sqlx::PgPool;

use super::ActionError;
use super::admit::admit_control;
use crate::domain::{AuditAction, Role};
use crate::store::hold::{self, AdapterHold, Holding};
use crate::store::journal::{self, Actor};

/// What resuming did.
#[derive(Debug, Clone, PartialEq)]
pub struct Resumed {
    /// The hold it ended.
    pub hold: AdapterHold,
    /// How many held steps went back to the queue.
    pub released: usize,
}

/// Holds adapter `name`: from the next claim on, no worker sends it a new request (claimed steps
/// wait `held`), nor a lookup unless `holds_lookups` is false; calls already in flight settle as
/// they would. Only an approver may hold, and only with a reason.
pub async fn hold_adapter(
    pool: &PgPool,
    (actor, role): (Actor<'_>, Role),
    name: &str,
    reason: &str,
    holds_lookups: bool,
) -> Result<AdapterHold, ActionError> {
    let reason = admit_control(role, Role::Approver, "Holding an adapter", reason)?;
    let mut tx = pool.begin().await?;
    let held = match hold::hold(&mut tx, name, &actor.label(), &reason, holds_lookups).await? {
        Holding::Held(held) => held,
        Holding::Already(standing) => {
            return Err(ActionError::Conflict(format!(
                "Sending to {name} is held already, by {} since {}: {}",
                standing.held_by,
                standing.held_at.format("%Y-%m-%d %H:%M UTC"),
                standing.reason
            )));
        }
        Holding::Unknown => return Err(unknown(name)),
    };
    let details = json!({ "adapter": name, "holds_lookups": holds_lookups });
    journal::audit_unattached(
        &mut tx,
        actor,
        AuditAction::AdapterHold,
        Some(&reason),
        details,
    )
    .await?;
    tx.commit().await?;
    Ok(held)
}

/// Resumes adapter `name`: its held steps go back to the queue, oldest first, all at once or
/// `per_second` of them a second. Only an approver may resume, and only with a reason.
pub async fn resume_adapter(
    pool: &PgPool,
    (actor, role): (Actor<'_>, Role),
    name: &str,
    reason: &str,
    per_second: Option<f64>,
) -> Result<Resumed, ActionError> {
    let reason = admit_control(role, Role::Approver, "Resuming an adapter", reason)?;
    if per_second.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(ActionError::Invalid(
            "The ramp must be a number of steps a second above zero.".into(),
        ));
    }
    let mut tx = pool.begin().await?;
    let Some(ended) = hold::resume(&mut tx, name).await? else {
        return Err(match hold::of(&mut *tx, name).await? {
            None => unknown(name),
            Some(_) => ActionError::Conflict(format!("Sending to {name} is not held.")),
        });
    };
    let released = crate::store::held::release(
        &mut tx,
        crate::store::held::Releasing::Adapter(name),
        per_second,
    )
    .await?;
    let details = json!({
        "adapter": name, "released": released, "per_second": per_second,
        "held_by": ended.held_by, "held_at": ended.held_at,
    });
    journal::audit_unattached(
        &mut tx,
        actor,
        AuditAction::AdapterResume,
        Some(&reason),
        details,
    )
    .await?;
    tx.commit().await?;
    Ok(Resumed {
        hold: ended,
        released,
    })
}

fn unknown(name: &str) -> ActionError {
    ActionError::Invalid(format!("No adapter is named `{name}`."))
}
