//! Recovery of a step found in `outcome_unknown` (docs/DESIGN.md §6): by the adapter's
//! contract, never by running the step body again. An idempotent destination gets the same key
//! again; a queryable one is asked first; an opaque one, or a contract that asks for review,
//! leaves the step to a person.

use std::time::Instant;

use uuid::Uuid;

use super::identity::Obligation;
use super::{StepReport, Worker, WorkerError, adapter_for, request_key};
use crate::domain::{
    LookupAnswer, RecoveryDecision, SideEffectContract, StepState, UnknownOutcomeFacts,
    decide_after_unknown,
};
use crate::failpoint::FaultPoint;
use crate::failpoint::{self, BrokenRule};
use crate::store::request;
use crate::store::step::{Claimed, Settle};
use crate::watch::latency;

/// How long a step in recovery waits before it is looked at again when its adapter is held.
const HELD_RECHECK_MS: i64 = 5_000;

impl Worker {
    /// Whether automatic recovery of `step` has run out of its window.
    fn recovery_deadline_passed(&self, step: &Claimed) -> bool {
        step.unknown_since.is_some_and(|since| {
            chrono::Utc::now() - since
                > chrono::Duration::from_std(self.config.recovery_window)
                    .unwrap_or(chrono::Duration::MAX)
        })
    }

    /// Where an unknown outcome goes next, by the decision table (docs/DESIGN.md §6).
    pub(super) fn after_unknown(
        &self,
        step: &Claimed,
        contract: &SideEffectContract,
        last_lookup: Option<LookupAnswer>,
        key_first_sent_ms_ago: Option<u64>,
    ) -> Settle {
        if failpoint::broken(BrokenRule::ResendOpaque) {
            return Settle::Unknown { recheck_millis: 0 };
        }
        let deadline_passed = self.recovery_deadline_passed(step);
        let facts = UnknownOutcomeFacts {
            last_lookup,
            recovery_deadline_passed: deadline_passed,
            key_first_sent_ms_ago,
        };
        match decide_after_unknown(contract, &facts) {
            RecoveryDecision::Review { .. } => Settle::Review,
            RecoveryDecision::QueryAgainAfter { wait_ms } => Settle::Unknown {
                recheck_millis: i64::try_from(wait_ms).unwrap_or(i64::MAX),
            },
            RecoveryDecision::ResendSameKey
            | RecoveryDecision::Query
            | RecoveryDecision::BackOffThenQuery
            | RecoveryDecision::RetrySameReference
            | RecoveryDecision::AttachStatusQueryReceipt { .. }
            | RecoveryDecision::OpenDigestConflictIncident { .. } => Settle::Unknown {
                recheck_millis: self.config.retry.backoff_ms(step.attempt_count.max(1)),
            },
        }
    }

    /// Recovery of a step found in `outcome_unknown`: by the contract, never by rerunning.
    pub(super) async fn recover(
        &self,
        step: &Claimed,
        claimed_at: Instant,
    ) -> Result<StepReport, WorkerError> {
        let (adapter, contract_version) = adapter_for(&self.adapters(), step)?;
        let key = request_key(step);
        // The contract (or the destination's URL) changed since the request was sent: what the
        // adapter can prove now says nothing about that request. A person decides.
        let sent = request::sent_under(&mut *self.pool.acquire().await?, key.as_str()).await?;
        let key_age = sent.as_ref().and_then(|s| s.first_sent_ms_ago);
        if sent.as_ref().is_some_and(|s| {
            s.contract_version != contract_version
                || s.adapter_version.is_some_and(|now| now != contract_version)
        }) {
            self.settle_alone(step, Settle::Review).await?;
            return Ok(StepReport::ToReview);
        }
        // The claims as the database trusts them now, not as this worker loaded them: a claim
        // production refuted since (a duplicate-effect incident) stops counting at once.
        let trusted = sent
            .and_then(|s| s.trusted)
            .unwrap_or_else(|| adapter.contract().clone());
        let contract = match step.withdraws {
            None => trusted,
            Some(_) => crate::domain::trust::for_withdrawal(&trusted),
        };
        let deadline_passed = self.recovery_deadline_passed(step);
        let mut facts = UnknownOutcomeFacts {
            last_lookup: None,
            recovery_deadline_passed: deadline_passed,
            key_first_sent_ms_ago: key_age,
        };
        loop {
            if failpoint::broken(BrokenRule::ResendOpaque) {
                return self.resend(step, claimed_at).await;
            }
            match decide_after_unknown(&contract, &facts) {
                RecoveryDecision::ResendSameKey | RecoveryDecision::RetrySameReference => {
                    return self.resend(step, claimed_at).await;
                }
                RecoveryDecision::Query => {
                    let (answer, report) =
                        self.hold().look_up(step, adapter.as_ref(), &key).await?;
                    match answer {
                        Some(answer) => facts.last_lookup = Some(answer),
                        None => return Ok(report),
                    }
                }
                RecoveryDecision::AttachStatusQueryReceipt { external_reference } => {
                    return self.hold().verified(step, &key, &external_reference).await;
                }
                RecoveryDecision::OpenDigestConflictIncident { external_reference } => {
                    return self
                        .hold()
                        .digest_conflict(step, &key, &external_reference)
                        .await;
                }
                decision @ (RecoveryDecision::QueryAgainAfter { .. }
                | RecoveryDecision::BackOffThenQuery
                | RecoveryDecision::Review { .. }) => {
                    let settle = match decision {
                        RecoveryDecision::Review { .. } => Settle::Review,
                        _ => {
                            self.after_unknown(step, &contract, facts.last_lookup.clone(), key_age)
                        }
                    };
                    self.settle_alone(step, settle).await?;
                    return Ok(if settle == Settle::Review {
                        StepReport::ToReview
                    } else {
                        StepReport::Looked {
                            answer: "inconclusive".into(),
                            state: StepState::OutcomeUnknown,
                        }
                    });
                }
            }
        }
    }

    /// A new attempt under the same key (idempotent replay, or after authoritative absence),
    /// recorded with its checkpoint 3.
    async fn resend(&self, step: &Claimed, claimed_at: Instant) -> Result<StepReport, WorkerError> {
        // An operator's hold stops resends too, whatever it lets lookups do, and so does a
        // paused workflow (docs/DESIGN.md §20): the step keeps its state and is looked at
        // again later.
        let adapter = step.adapter.as_deref().unwrap_or_default();
        if crate::store::held::stopped(&self.pool, adapter, step.workflow_id).await? {
            let recheck_millis = HELD_RECHECK_MS;
            self.settle_alone(step, Settle::Unknown { recheck_millis })
                .await?;
            return Ok(StepReport::Looked {
                answer: "held: not resent while its adapter is held or its workflow paused".into(),
                state: StepState::OutcomeUnknown,
            });
        }
        self.attempt_alone(step, Uuid::now_v7(), claimed_at).await
    }

    /// Checkpoints 2–6 for attempt `attempt` (not yet recorded) of a step in recovery, one step
    /// in transactions of its own: the identity ([`Worker::bind_obligation`]), the call, then
    /// its conclusion.
    async fn attempt_alone(
        &self,
        step: &Claimed,
        attempt: Uuid,
        claimed_at: Instant,
    ) -> Result<StepReport, WorkerError> {
        let (adapter, contract_version) = adapter_for(&self.adapters(), step)?;
        let key = request_key(step);
        let prepared = match self
            .bind_obligation(step, attempt, &key, adapter.as_ref(), contract_version)
            .await?
        {
            Obligation::Bound(prepared) => *prepared,
            Obligation::Concluded(report) => return Ok(report),
        };
        failpoint::hit(FaultPoint::AfterObligationCommit);

        // Checkpoint 4: the call, outside any transaction, with the lease renewed meanwhile.
        let adapter_name = step.adapter.as_deref().unwrap_or_default();
        latency::claim_to_send(adapter_name, claimed_at.elapsed());
        let sent = Instant::now();
        let observation = self
            .call_alone(step, adapter.as_ref(), &key, &prepared)
            .await;
        latency::adapter_call(adapter_name, observation.outcome(), sent.elapsed());
        failpoint::hit(if step.withdraws.is_some() {
            FaultPoint::DuringCompensationAcceptance
        } else {
            FaultPoint::AfterResponseBeforeObservation
        });

        // Checkpoints 5 and 6.
        let tx = self.pool.begin().await?;
        let concluded = self
            .conclude(
                tx,
                step,
                attempt,
                &key,
                adapter.as_ref(),
                observation.clone(),
            )
            .await;
        if let Err(error) = &concluded {
            self.keep_observation(step, attempt, &key, &observation, error)
                .await;
        }
        concluded
    }
}
