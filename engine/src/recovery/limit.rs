//! Overriding an adapter's outbound limits (docs/DESIGN.md §20): during a provider's trouble an
//! approver lowers what reaches it — requests per second, calls in flight — for every worker
//! process, without touching its file; clearing the override restores the file's limits. Both
//! are audited with the reason.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgPool;

use super::ActionError;
use super::admit::admit_control;
use crate::domain::{AuditAction, Limits, Role};
use crate::store::journal::{self, Actor};
use crate::store::pace::{self, LimitOverride};

/// The override a page showed when it was drawn: when the one in force was set, or `None` for
/// none. Two approvers on one adapter's page: the second one's post, drawn before the first
/// one's change, is refused rather than undoing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown(pub Option<DateTime<Utc>>);

/// Sets adapter `name`'s limits to `limits` (`None` values keep the file's), or clears the
/// override when `limits` names none; refused as stale when `shown` (a page's view) is no
/// longer the override in force. Returns the override in force afterwards.
pub async fn limit_adapter(
    pool: &PgPool,
    (actor, role): (Actor<'_>, Role),
    name: &str,
    limits: Limits,
    reason: &str,
    shown: Option<Shown>,
) -> Result<Option<LimitOverride>, ActionError> {
    let reason = admit_control(role, Role::Approver, "Limiting an adapter", reason)?;
    if let Some(problem) = limits.problem() {
        return Err(ActionError::Invalid(format!("The limit's {problem}.")));
    }
    let mut tx = pool.begin().await?;
    let set_at = pace::lock_override(&mut tx, name)
        .await?
        .ok_or_else(|| unknown(name))?;
    if shown.is_some_and(|Shown(seen)| seen != set_at) {
        return Err(ActionError::Stale(format!(
            "The limits of {name} changed since your page was drawn (by another approver). Nothing was done; review them again."
        )));
    }
    let before = if limits.is_unlimited() {
        match pace::of(&mut *tx, name).await? {
            None => return Err(unknown(name)),
            Some(_) => pace::clear(&mut tx, name).await?,
        }
    } else {
        pace::set(&mut tx, name, limits, &actor.label(), &reason)
            .await?
            .map_err(|()| unknown(name))?
    };
    let details = json!({
        "adapter": name,
        "requests_per_second": limits.requests_per_second,
        "in_flight": limits.in_flight,
        "cleared": limits.is_unlimited(),
        "before": before.map(|b| b.limits),
    });
    journal::audit_unattached(
        &mut tx,
        actor,
        AuditAction::AdapterLimit,
        Some(&reason),
        details,
    )
    .await?;
    let after = pace::of(&mut *tx, name).await?.flatten();
    tx.commit().await?;
    Ok(after)
}

fn unknown(name: &str) -> ActionError {
    ActionError::Invalid(format!("No adapter is named `{name}`."))
}
