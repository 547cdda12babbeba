//! Checkpoints 5 and 6 for one result (docs/DESIGN.md §4): a recovery's attempt, an attempt
//! concluded without a call, and what a flush could not settle with the others — the same
//! [`Worker::settle`] with a batch of one, and what only one step at a time can have: a lost
//! lease, a duplicate reference. Where a step goes after an attempt that did not succeed
//! ([`Worker::settle_after`]) is decided here for both.

use serde_json::json;
use uuid::Uuid;

use super::{Attempted, prepared, report_of};
use crate::adapter::Adapter;
use crate::domain::{
    AcceptedReceipt, AttemptOutcome, EventKind, ObservationKind, RequestKey, TransportObservation,
};
use crate::failpoint::{self, FaultPoint};
use crate::store::attempt;
use crate::store::guard::LeaseLost;
use crate::store::lease;
use crate::store::step::{Claimed, Settle};
use crate::store::workflow;
use crate::worker::call::Conclusion;
use crate::worker::{StepReport, Worker, WorkerError};

impl Worker {
    /// Checkpoints 5 and 6 for one attempt, in `tx`: [`Worker::settle`] with a batch of one,
    /// under whatever lease of this worker the step holds. What it leaves goes to
    /// [`Worker::settle_duplicate`].
    #[tracing::instrument(name = "checkpoint.conclude", skip_all, fields(outcome = ?observation.outcome()))]
    pub(in crate::worker) async fn conclude(
        &self,
        mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
        step: &Claimed,
        attempt: Uuid,
        key: &RequestKey,
        adapter: &dyn Adapter,
        observation: TransportObservation,
    ) -> Result<StepReport, WorkerError> {
        let attempted = Attempted {
            attempt,
            key,
            adapter,
            observation: &observation,
        };
        let prepared = prepared(step, self.observed_settling(step, None, None, &attempted));
        if self
            .settle(&mut tx, std::slice::from_ref(&prepared))
            .await?
            .contains(&step.id)
        {
            tx.commit().await?;
            failpoint::hit(FaultPoint::AfterReceiptBeforeAck);
            return Ok(report_of(&prepared));
        }
        self.settle_duplicate(tx, step, attempt, key, &observation)
            .await
    }

    /// What [`Worker::settle`] leaves of one attempt: the lease lost (an error: this worker
    /// changes nothing, and the answer is kept on the timeline), or an accepted answer for a
    /// step that already holds a receipt — a second reference for one request, which
    /// `record_reference` records as a duplicate-effect incident (docs/DESIGN.md §9).
    async fn settle_duplicate(
        &self,
        mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
        step: &Claimed,
        attempt: Uuid,
        key: &RequestKey,
        observation: &TransportObservation,
    ) -> Result<StepReport, WorkerError> {
        lease::hold_lease(&mut tx, step.id, self.name()).await?;
        attempt::end_attempt(&mut tx, step.id, attempt, Some(key.as_str()), observation).await?;
        let Some(accepted) = AcceptedReceipt::of_answer(observation, step.withdraws.is_some())
        else {
            // Held, and the attempt not yet ended, yet the statement settled nothing: another
            // writer moved the step under this lease. Nothing of it is this worker's to change.
            return Err(WorkerError::LeaseLost(LeaseLost { step: step.id }));
        };
        let outcome = observation.outcome();
        let state = self
            .hold()
            .record_reference(
                &mut tx,
                step,
                key,
                &accepted.external_reference,
                accepted.method,
                &accepted.summary,
            )
            .await?;
        workflow::announce(
            &mut tx,
            step.workflow_id,
            EventKind::StepAttemptEnded,
            &json!({
                "step": step.id, "outcome": outcome, "state": state,
                "logical": step.logical, "adapter": step.adapter, "method": accepted.method,
            }),
        )
        .await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        failpoint::hit(FaultPoint::AfterReceiptBeforeAck);
        Ok(StepReport::Settled { outcome, state })
    }

    /// Where a step goes after an attempt that did not succeed: recovery for an unknown
    /// outcome; a safe retry with back-off, rejection or review for the others.
    pub(in crate::worker) fn settle_after(
        &self,
        step: &Claimed,
        adapter: &dyn Adapter,
        observation: &TransportObservation,
        outcome: AttemptOutcome,
    ) -> Settle {
        let contract = adapter.contract();
        match outcome {
            // The key's age matters only to a replay, which `recover` decides with it; a
            // withdrawal is decided by its own claim, as `recover` decides it.
            AttemptOutcome::OutcomeUnknown if step.withdraws.is_some() => {
                let withdrawal = crate::domain::trust::for_withdrawal(contract);
                self.after_unknown(step, &withdrawal, None, None)
            }
            AttemptOutcome::OutcomeUnknown => self.after_unknown(step, contract, None, None),
            AttemptOutcome::Rejected | AttemptOutcome::FailedBeforeEffect => {
                let attempts = step.attempt_count.max(1);
                let (budget, backoff_ms) = match contract.retry {
                    Some(schedule) => (
                        i32::try_from(schedule.attempts).unwrap_or(i32::MAX),
                        i64::try_from(schedule.backoff_after(u32::try_from(attempts).unwrap_or(1)))
                            .unwrap_or(i64::MAX),
                    ),
                    None => (
                        self.config.retry.max_attempts,
                        self.config.retry.backoff_ms(attempts),
                    ),
                };
                if observation.may_retry(contract) && attempts < budget {
                    Settle::RetryAfter { millis: backoff_ms }
                } else if outcome == AttemptOutcome::Rejected {
                    Settle::Rejected
                } else if let TransportObservation::RequestDiverged { .. } = observation {
                    // This attempt sent nothing, but the key is bound to other bytes, which an
                    // earlier system may have sent: a person decides.
                    Settle::Review
                } else {
                    // Nothing was sent: not a review of an unknown outcome, unless an earlier
                    // attempt may have had an effect (the settling statement checks).
                    Settle::Unsent
                }
            }
            AttemptOutcome::Succeeded => unreachable!("only an accepted observation succeeds"),
        }
    }
}

impl Worker {
    /// Settles one result alone, in a transaction of its own: what a flush could not settle
    /// with the others. If even that fails, what the destination answered is kept on the
    /// step's timeline, and the step waits for its lease to expire and the sweeper.
    pub(in crate::worker) async fn conclude_alone(
        &self,
        step: Claimed,
        conclusion: Conclusion,
    ) -> Result<StepReport, WorkerError> {
        match conclusion {
            Conclusion::Pure { .. } => {
                let prepared = self.prepare(&step, None, None, &conclusion);
                let mut tx = self.pool.begin().await?;
                if !self
                    .settle(&mut tx, std::slice::from_ref(&prepared))
                    .await?
                    .contains(&step.id)
                {
                    return Err(WorkerError::LeaseLost(LeaseLost { step: step.id }));
                }
                tx.commit().await?;
                Ok(StepReport::PureCompleted)
            }
            Conclusion::Observed {
                attempt,
                key,
                adapter,
                observation,
            } => {
                let tx = self.pool.begin().await?;
                let concluded = self
                    .conclude(
                        tx,
                        &step,
                        attempt,
                        &key,
                        adapter.as_ref(),
                        observation.clone(),
                    )
                    .await;
                if let Err(error) = &concluded {
                    self.keep_observation(&step, attempt, &key, &observation, error)
                        .await;
                }
                concluded
            }
        }
    }

    /// Keeps what the destination answered on the step's timeline when it could not settle
    /// the step: the lease was lost (the step belongs to someone else now, and this worker
    /// changes none of its state), or the database refused the result. An answer that cannot
    /// be stored as it is (a NUL character) is kept as its description.
    pub(in crate::worker) async fn keep_observation(
        &self,
        step: &Claimed,
        attempt: Uuid,
        key: &RequestKey,
        observation: &TransportObservation,
        error: &WorkerError,
    ) {
        let late = matches!(error, WorkerError::LeaseLost(_));
        let mut body = json!({ "late": late, "attempt": attempt, "observation": observation });
        if !late {
            body["unsettled"] = json!(error.to_string());
        }
        let (step_id, key) = (step.id, Some(key.as_str()));
        let kept = async {
            let mut conn = self.pool.acquire().await?;
            let stored = attempt::record_observation(
                &mut conn,
                step_id,
                Some(attempt),
                key,
                ObservationKind::Transport,
                &body,
            )
            .await;
            if let Err(refused) = stored {
                let described = json!({
                    "late": late, "attempt": attempt, "unstorable": format!("{observation:?}"),
                    "refused": refused.to_string(),
                });
                attempt::record_observation(
                    &mut conn,
                    step_id,
                    Some(attempt),
                    key,
                    ObservationKind::Transport,
                    &described,
                )
                .await?;
            }
            Ok::<(), sqlx::Error>(())
        };
        if let Err(error) = kept.await {
            tracing::error!(step = %step.id, %error, ?observation, "an observation could not be kept");
        }
    }
}
