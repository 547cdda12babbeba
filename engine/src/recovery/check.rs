//! *Check destination*: one lookup by client reference, made on the operator's behalf under a
//! lease of its own, and the answer put in words (docs/DESIGN.md §6, §7).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::adapter::registry::Adapters;
use crate::domain::{LookupAnswer, SideEffectContract};
use crate::store::action::StepFacts;
use crate::store::lease::lease_for_operator;

use super::Done;
use super::error::ActionError;

/// *Check destination*: leases the step to the operator, asks the destination by client
/// reference, and acts on the answer as the decision table says.
pub(super) async fn check_destination(
    pool: &PgPool,
    locked: &StepFacts,
    step_id: Uuid,
    holder: &str,
    now: Option<DateTime<Utc>>,
) -> Result<Done, ActionError> {
    let adapters = std::sync::Arc::new(Adapters::load(pool).await?);
    let contract = locked
        .contract
        .clone()
        .unwrap_or_else(|| unreachable!("admitted"));
    let lease = Duration::from_millis(contract.deadline_ms.saturating_mul(2) + 5_000);
    let holder = crate::worker::lease_holder(holder);
    let mut tx = pool.begin().await?;
    let leased = lease_for_operator(&mut tx, step_id, &holder, lease.as_secs_f64())
        .await?
        .ok_or_else(|| {
            ActionError::Conflict(
                "Someone else is checking this step right now; reload in a moment.".into(),
            )
        })?;
    tx.commit().await?;
    let answer =
        crate::worker::check_destination(pool, adapters, &leased, &holder, lease, now).await?;
    Ok(Done {
        message: answer_in_words(answer, &contract, now.unwrap_or_else(Utc::now)),
        step: step_id,
    })
}

/// What the lookup found and what it did, for the operator; `None` is more than one delivery.
fn answer_in_words(
    answer: Option<LookupAnswer>,
    contract: &SideEffectContract,
    now: DateTime<Utc>,
) -> String {
    let window = contract.visibility_window_ms;
    let settles_in_ms = answer
        .as_ref()
        .map_or(0, |a| a.index_settles_in_ms(contract));
    match answer {
        None => "The destination holds more than one effect for this request: a duplicate-effect incident is open.".to_owned(),
        Some(LookupAnswer::Found { external_reference, digest_matches: true, .. }) if settles_in_ms > 0 => format!(
            "Found {external_reference}, but the destination's status index may lag up to {window} ms behind it: another effect under this key may not show yet. Check again after {} to settle the step.",
            check_again_at(now, settles_in_ms)
        ),
        Some(LookupAnswer::Found { external_reference, digest_matches: true, .. }) => {
            format!("Verified from external reference {external_reference}: the step succeeded with a status-query receipt.")
        }
        Some(LookupAnswer::Found { external_reference, digest_matches: false, .. }) => format!(
            "The destination holds {external_reference} under this request key with other content: an integrity incident is open and the step awaits review."
        ),
        Some(answer @ LookupAnswer::NotFound { .. }) => {
            if answer.is_authoritative_absence(contract) {
                if contract.create_after_authoritative_absence
                    && contract.kind() == crate::domain::ContractKind::Queryable
                {
                    "Not found, and the visibility window has passed: absence is authoritative. Retry with the same reference is now permitted.".to_owned()
                } else if contract.create_after_authoritative_absence {
                    "Not found, and the visibility window has passed: absence is authoritative. Replace is now permitted; a retry under the same key stays what the key's retention allows.".to_owned()
                } else {
                    "Not found, and the visibility window has passed: absence is authoritative, but this contract does not allow sending again.".to_owned()
                }
            } else {
                format!(
                    "Not found yet, but the destination's status index may lag up to {window} ms behind it: absence is not proof. Check again after {}.",
                    check_again_at(now, settles_in_ms)
                )
            }
        }
        Some(LookupAnswer::Processing) => "The destination is still processing the request; check again shortly.".to_owned(),
        Some(LookupAnswer::Unavailable) => "The destination's status lookup did not answer; nothing changed. Check again later.".to_owned(),
    }
}

/// When, in `wait_ms`, the destination's status index will have caught up: rounded up to the
/// second, so a check at the time said is never early.
fn check_again_at(now: DateTime<Utc>, wait_ms: u64) -> String {
    let wait = i64::try_from(wait_ms)
        .unwrap_or(i64::MAX / 2)
        .saturating_add(999);
    let at = now + chrono::Duration::milliseconds(wait);
    at.format("%H:%M:%S UTC").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_time_to_check_again_is_rounded_up_never_early() {
        let now = DateTime::parse_from_rfc3339("2026-12-06T15:23:06.860Z")
            .unwrap()
            .with_timezone(&Utc);
        // Settles at 15:23:08.360: 15:23:08 would be early.
        assert_eq!(check_again_at(now, 1_500), "15:23:09 UTC");
        assert_eq!(check_again_at(now, 140), "15:23:07 UTC");
    }
}
