//! Checkpoints 2–6 of docs/DESIGN.md §4 one step at a time: a recovery's new attempt under the
//! same key (authority and the request identity before any byte is sent, the call outside any
//! transaction, then the observation and the receipt in one transaction), and the one-step
//! conclusion a batch falls back to for a result it could not settle with the others.

use std::time::Instant;

use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use super::work::Conclusion;
use super::{
    StepReport, Worker, WorkerError, adapter_for, definition_of, request_key, settled_state,
};
use crate::adapter::{Adapter, PrepareError, PreparedRequest};
use crate::definition::{Definition, InputError};
use crate::domain::{
    AttemptOutcome, EventKind, ReceiptMethod, RequestKey, StepState, TransportObservation, event,
};
use crate::failpoint::{self, BrokenRule, FaultPoint};
use crate::store::step::{self, Claimed, Settle};
use crate::store::{attempt, conclusion, lease, request, workflow};
use crate::watch::latency;

impl Worker {
    /// Checkpoints 2–6 for attempt `attempt` (not yet recorded) of a step in recovery.
    pub(super) async fn invoke(
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

    /// Checkpoints 2 and 3: authority, then the request identity, before any byte is sent. A
    /// denied authority or a request that no longer regenerates identically concludes the
    /// attempt here, in the same transaction, without a call.
    #[tracing::instrument(name = "checkpoint.obligation", skip_all)]
    async fn bind_obligation(
        &self,
        step: &Claimed,
        attempt: Uuid,
        key: &RequestKey,
        adapter: &dyn Adapter,
        contract_version: i32,
    ) -> Result<Obligation, WorkerError> {
        let subject = definition_of(&self.pool, step)
            .await?
            .subject(&step.workflow_input)
            .map_err(|source| WorkerError::Definition {
                step: step.id,
                source,
            })?;
        let mut tx = self.pool.begin().await?;
        let prepared = prepare(&mut tx, step, key, adapter).await?;
        let adapter_name = step.adapter.as_deref().unwrap_or_default();
        let authority = attempt::authority_check(&mut tx, adapter_name, &subject).await?;
        let recording = |digest| attempt::NewAttempt {
            id: attempt,
            step: step.id,
            worker: self.name(),
            request_key: key.as_str(),
            request_digest: digest,
            authority: &authority.record,
        };
        if let Some(reason) = authority.denied.clone() {
            attempt::record(&mut tx, &recording(None), false).await?;
            let observation = TransportObservation::AuthorityDenied { reason };
            let report = self
                .conclude(tx, step, attempt, key, adapter, observation)
                .await?;
            return Ok(Obligation::Concluded(report));
        }
        let bound = request::bind_request(
            &mut tx,
            &request::RequestIdentity {
                key: key.as_str(),
                step: step.id,
                digest: prepared.request_digest.as_str(),
                summary: &prepared.summary,
                adapter: adapter_name,
                contract_version,
            },
        )
        .await?;
        let digest = Some(prepared.request_digest.as_str());
        if bound != prepared.request_digest.as_str() {
            attempt::record(&mut tx, &recording(digest), false).await?;
            let observation = TransportObservation::RequestDiverged {
                bound,
                regenerated: prepared.request_digest.to_string(),
            };
            let report = self
                .conclude(tx, step, attempt, key, adapter, observation)
                .await?;
            return Ok(Obligation::Concluded(report));
        }
        attempt::record(&mut tx, &recording(digest), true).await?;
        tx.commit().await?;
        Ok(Obligation::Bound(Box::new(prepared)))
    }

    /// Checkpoint 4: the delivery (or, for a compensation step, the withdrawal) it asks for.
    #[tracing::instrument(
        name = "adapter.call",
        skip_all,
        fields(adapter = step.adapter.as_deref().unwrap_or_default(), withdrawal = step.withdraws.is_some())
    )]
    async fn call_alone(
        &self,
        step: &Claimed,
        adapter: &dyn Adapter,
        key: &RequestKey,
        prepared: &PreparedRequest,
    ) -> TransportObservation {
        let call = match &step.withdraws {
            None => adapter.deliver(key, prepared),
            Some(target) => {
                Box::pin(async move { adapter.withdraw(key, target).await.into_transport() })
            }
        };
        self.hold().call_renewing(step.id, call).await
    }

    /// Checkpoints 5 and 6: the observation, then the receipt or where the step goes next.
    #[tracing::instrument(name = "checkpoint.conclude", skip_all, fields(outcome = ?observation.outcome()))]
    pub(super) async fn conclude(
        &self,
        mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
        step: &Claimed,
        attempt: Uuid,
        key: &RequestKey,
        adapter: &dyn Adapter,
        observation: TransportObservation,
    ) -> Result<StepReport, WorkerError> {
        let worker = self.config.name.as_str();
        // The workflow first, in the order every flush takes it; then the lease must still be
        // ours before anything is written. Every path below settles the step and so ends the
        // lease in this transaction.
        conclusion::lock_workflows(&mut tx, &[step.workflow_id]).await?;
        lease::hold_lease(&mut tx, step.id, worker).await?;
        attempt::end_attempt(&mut tx, step.id, attempt, Some(key.as_str()), &observation).await?;
        let outcome = observation.outcome();
        let method = ReceiptMethod::of_answer(&observation);
        let state = match (&observation, method) {
            (
                TransportObservation::Accepted {
                    external_reference,
                    replayed,
                    status,
                    fields,
                },
                Some(method),
            ) => {
                // The typed receipt fields the adapter's rule read from the answer; dependants
                // read them as `steps.<name>.<field>` (store::step::dependency_facts).
                let summary = super::flush::receipt_summary(*status, *replayed, fields);
                self.hold()
                    .record_reference(&mut tx, step, key, external_reference, method, &summary)
                    .await?
            }
            _ => {
                let settle = self.settle_after(step, adapter, &observation, outcome);
                step::settle(&mut tx, step.id, Some(worker), settle).await?;
                settled_state(settle)
            }
        };
        workflow::announce(
            &mut tx,
            step.workflow_id,
            EventKind::StepAttemptEnded,
            &json!({
                "step": step.id, "outcome": outcome, "state": state,
                "logical": step.logical, "adapter": step.adapter, "method": method,
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
    pub(super) fn settle_after(
        &self,
        step: &Claimed,
        adapter: &dyn Adapter,
        observation: &TransportObservation,
        outcome: AttemptOutcome,
    ) -> Settle {
        let contract = adapter.contract();
        match outcome {
            // The key's age matters only to a replay, which `recover` decides with it.
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
    pub(super) async fn conclude_alone(
        &self,
        step: Claimed,
        conclusion: Conclusion,
    ) -> Result<StepReport, WorkerError> {
        match conclusion {
            Conclusion::Pure { output } => {
                let mut tx = self.pool.begin().await?;
                conclusion::lock_workflows(&mut tx, &[step.workflow_id]).await?;
                step::complete_pure(&mut tx, step.id, self.name(), &output).await?;
                step::release_dependants(&mut tx, step.workflow_id).await?;
                let event = event::pure_step_succeeded(step.id, &step.logical);
                workflow::announce(&mut tx, step.workflow_id, EventKind::StepSucceeded, &event)
                    .await?;
                workflow::refresh_state(&mut tx, step.workflow_id).await?;
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
    async fn keep_observation(
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
                "transport",
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
                    "transport",
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

/// Checkpoints 2–3 either bound the request (and the call may go) or concluded the attempt.
enum Obligation {
    Bound(Box<PreparedRequest>),
    Concluded(StepReport),
}

/// Regenerates the request from the immutable inputs (recovery compares it with the bound one).
pub(crate) async fn prepare(
    conn: &mut PgConnection,
    step: &Claimed,
    key: &RequestKey,
    adapter: &dyn Adapter,
) -> Result<PreparedRequest, WorkerError> {
    // The harness's broken rule: recovery regenerates the request under the newest
    // definition instead of the one the workflow started with.
    let definition = if step.state == StepState::OutcomeUnknown
        && failpoint::broken(BrokenRule::RegenerateWithNewest)
    {
        let newest = crate::store::definition::newest_version(&mut *conn, &step.definition_name)
            .await?
            .unwrap_or(step.definition_version);
        let newest = Claimed {
            definition_version: newest,
            ..step.clone()
        };
        definition_of(&mut *conn, &newest).await?
    } else {
        definition_of(&mut *conn, step).await?
    };
    let deps = match step.withdraws {
        Some(_) => Value::Null,
        None => step::dependency_facts(&mut *conn, step.workflow_id).await?,
    };
    render_with(step, key, adapter, &definition, &deps)
}

/// The request of `step` under `key` rendered by `definition` from its input and `deps` (its
/// dependencies' facts), as `adapter` sends it; a compensation step's is its withdrawal.
pub(crate) fn render_with(
    step: &Claimed,
    key: &RequestKey,
    adapter: &dyn Adapter,
    definition: &Definition,
    deps: &Value,
) -> Result<PreparedRequest, WorkerError> {
    let unprepared = |source: PrepareError| WorkerError::Definition {
        step: step.id,
        source: InputError::Invalid(source.0),
    };
    if let Some(target) = &step.withdraws {
        return adapter.prepare_withdrawal(key, target).map_err(unprepared);
    }
    let rendered = definition
        .render_request(&step.logical, key.as_str(), &step.workflow_input, deps)
        .map_err(|source| WorkerError::Definition {
            step: step.id,
            source,
        })?;
    adapter
        .prepare(key, &rendered.request, &rendered.content_digest)
        .map_err(unprepared)
}

/// Binds the regenerated request to `key` where no identity was persisted: a step restored
/// from a backup taken before its call, now proven by a lookup or by an operator's evidence.
/// Regeneration is deterministic, so this is the request the live system sent.
pub async fn bind_regenerated(
    conn: &mut PgConnection,
    step: &Claimed,
    key: &RequestKey,
    adapter: &dyn Adapter,
    contract_version: i32,
) -> Result<(), WorkerError> {
    if request::request_identity(conn, key.as_str())
        .await?
        .is_some()
    {
        return Ok(());
    }
    let prepared = prepare(conn, step, key, adapter).await?;
    request::bind_request(
        conn,
        &request::RequestIdentity {
            key: key.as_str(),
            step: step.id,
            digest: prepared.request_digest.as_str(),
            summary: &prepared.summary,
            adapter: step.adapter.as_deref().unwrap_or_default(),
            contract_version,
        },
    )
    .await?;
    Ok(())
}

/// [`bind_regenerated`] for a step the caller holds locked but not leased: an operator's
/// evidence for a step restored from a backup taken before its call.
pub async fn bind_regenerated_for(
    conn: &mut PgConnection,
    step: Uuid,
    key: &RequestKey,
    adapter: &dyn Adapter,
    contract_version: i32,
) -> Result<(), WorkerError> {
    let Some(claimed) = step::read_claimed(conn, step).await? else {
        return Err(sqlx::Error::RowNotFound.into());
    };
    bind_regenerated(conn, &claimed, key, adapter, contract_version).await
}
