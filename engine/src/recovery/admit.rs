//! The checks an action passes before it changes anything: the operator's text, then the role,
//! the page's freshness, a worker's lease and the contract, decided again inside the action's
//! transaction by the same function that drew the page.

use crate::domain::{OperatorAction, Role, refusal};
use crate::operators::Operator;
use crate::store::action::StepFacts;

use super::error::ActionError;

/// Refuses an action the operator's role never allows, before anything is read or locked: a
/// viewer's post takes no row lock.
pub(super) fn admit_role(role: Role, action: OperatorAction) -> Result<(), ActionError> {
    if role.may(action) {
        return Ok(());
    }
    Err(ActionError::Forbidden(format!(
        "{} needs the {} role; you are signed in as {}.",
        action.label(),
        action.required_role().as_str(),
        role.as_str()
    )))
}

/// Refuses `action` on a step of an adapter a token made with `--adapters` may not use.
pub(super) fn admit_adapter(
    locked: &StepFacts,
    operator: &Operator,
    action: OperatorAction,
) -> Result<(), ActionError> {
    match locked.adapter.as_deref() {
        Some(adapter) if !operator.may_use(adapter) => Err(ActionError::Forbidden(format!(
            "{} on a step of adapter `{adapter}` needs a token that may use it; `{}` may use only {}.",
            action.label(),
            operator.username,
            operator.adapters.as_deref().unwrap_or_default().join(", ")
        ))),
        _ => Ok(()),
    }
}

/// Checks, under the step's row lock, in order: the adapters a token may use, the page's
/// freshness, a worker's lease, the contract (the role was checked by [`admit_role`] before
/// the lock was taken).
pub(super) fn admit(
    locked: &StepFacts,
    operator: &Operator,
    action: OperatorAction,
    seen: Option<i64>,
) -> Result<(), ActionError> {
    admit_adapter(locked, operator, action)?;
    if seen.is_some_and(|v| v != locked.version) {
        return Err(ActionError::Stale(format!(
            "This step changed since your page was drawn (it is now {}). Nothing was done; review the evidence again.",
            locked.state.label().to_lowercase()
        )));
    }
    if let Some(until) = locked.leased_until {
        return Err(ActionError::Conflict(format!(
            "A worker is handling this step right now (its lease runs until {}). Nothing was done; reload in a moment.",
            until.format("%H:%M:%S UTC")
        )));
    }
    let facts = locked.decision_facts().ok_or_else(|| {
        ActionError::NotPermitted(format!(
            "{} does not apply to a step that calls no destination.",
            action.label()
        ))
    })?;
    match refusal(&facts, operator.role, action) {
        None => Ok(()),
        Some(why) => Err(ActionError::NotPermitted(why)),
    }
}

/// Admits a control over more than one step (holding an adapter, pausing a workflow): the
/// role must be at least `least`, and the reason given. Returns the reason, trimmed.
pub(super) fn admit_control(
    role: Role,
    least: Role,
    what: &str,
    reason: &str,
) -> Result<String, ActionError> {
    admit_at_least(role, least, what)?;
    required("A reason", reason, 2000)
}

/// Refuses `what` to a role below `least`, in words.
pub(super) fn admit_at_least(role: Role, least: Role, what: &str) -> Result<(), ActionError> {
    if role < least {
        return Err(ActionError::Forbidden(format!(
            "{what} needs the {} role; you are signed in as {}.",
            least.as_str(),
            role.as_str()
        )));
    }
    Ok(())
}

/// `value` trimmed, if it is present, at most `max` characters, and storable: PostgreSQL
/// cannot store a NUL character and would answer with a driver error instead of a sentence.
pub(super) fn required(field: &str, value: &str, max: usize) -> Result<String, ActionError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ActionError::Invalid(format!("{field} is required.")));
    }
    if value.chars().count() > max {
        return Err(ActionError::Invalid(format!(
            "{field} is longer than {max} characters."
        )));
    }
    if value.contains('\0') {
        return Err(ActionError::Invalid(format!(
            "{field} contains a NUL character."
        )));
    }
    Ok(value.to_owned())
}
