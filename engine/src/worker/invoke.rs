//! Checkpoints 2–6 of docs/DESIGN.md §4 for an attempt already recorded: authority and the
//! request identity before any byte is sent, the call outside any transaction, then the
//! observation and the receipt (or where the step goes next) in one transaction.

use std::time::Instant;

use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{
    StepReport, Worker, WorkerError, adapter_for, definition_of, request_key, settled_state,
};
use crate::adapter::{Adapter, PrepareError, PreparedRequest, WithdrawalObservation};
use crate::definition::InputError;
use crate::domain::{
    AttemptOutcome, EventKind, ReceiptMethod, RequestKey, StepState, TransportObservation,
};
use crate::failpoint::{self, BrokenRule, FaultPoint};
use crate::store::step::{self, Claimed, Settle};
use crate::store::{attempt, lease, request, workflow};
use crate::watch::latency;

impl Worker {
    /// A pure step: a deterministic transform of the input, with no boundary to cross.
    #[tracing::instrument(name = "checkpoint.pure", skip_all)]
    pub(super) async fn run_pure(&self, step: &Claimed) -> Result<StepReport, WorkerError> {
        let definition = definition_of(&self.pool, step).await?;
        let attempt = match step.attempt {
            Some(attempt) => attempt,
            None => self.open_attempt(step).await?,
        };
        let mut tx = self.pool.begin().await?;
        let dependencies = step::dependency_facts(&mut tx, step.workflow_id).await?;
        let output = definition
            .run_pure(&step.logical, &step.workflow_input, &dependencies)
            .map_err(|source| WorkerError::Definition {
                step: step.id,
                source,
            })?;
        attempt::end_pure_attempt(&mut tx, attempt).await?;
        step::complete_pure(&mut tx, step.id, &self.config.name, &output).await?;
        step::release_dependants(&mut tx, step.workflow_id).await?;
        workflow::announce(
            &mut tx,
            step.workflow_id,
            EventKind::StepSucceeded,
            &json!({ "step": step.id, "logical": step.logical }),
        )
        .await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        Ok(StepReport::PureCompleted)
    }

    /// Checkpoints 2–6 for an attempt already recorded, on a step claimed at `claimed_at`.
    pub(super) async fn invoke(
        &self,
        step: &Claimed,
        attempt: Uuid,
        claimed_at: Instant,
    ) -> Result<StepReport, WorkerError> {
        let (adapter, contract_version) = adapter_for(&self.adapters, step)?;
        let key = request_key(step);
        let prepared = match self
            .bind_obligation(step, attempt, &key, adapter.as_ref(), contract_version)
            .await?
        {
            Obligation::Bound(prepared) => prepared,
            Obligation::Concluded(report) => return Ok(report),
        };
        failpoint::hit(FaultPoint::AfterObligationCommit);

        // Checkpoint 4: the call, outside any transaction, with the lease renewed meanwhile.
        let adapter_name = step.adapter.as_deref().unwrap_or_default();
        latency::claim_to_send(adapter_name, claimed_at.elapsed());
        let sent = Instant::now();
        let observation = self.call(step, adapter.as_ref(), &key, &prepared).await;
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
        if let Err(WorkerError::LeaseLost(_)) = &concluded {
            // The step belongs to someone else now and this worker changes none of its state,
            // but what the destination answered is evidence: keep it on the timeline.
            let body = json!({ "late": true, "attempt": attempt, "observation": observation });
            let mut conn = self.pool.acquire().await?;
            attempt::record_observation(
                &mut conn,
                step.id,
                Some(attempt),
                Some(key.as_str()),
                "transport",
                &body,
            )
            .await?;
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
        if let Some(reason) =
            attempt::authority_check(&mut tx, step.id, attempt, adapter_name, &subject).await?
        {
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
        if bound != prepared.request_digest.as_str() {
            let observation = TransportObservation::RequestDiverged {
                bound,
                regenerated: prepared.request_digest.to_string(),
            };
            let report = self
                .conclude(tx, step, attempt, key, adapter, observation)
                .await?;
            return Ok(Obligation::Concluded(report));
        }
        step::mark_invoking(&mut tx, step.id, &self.config.name, attempt, key.as_str()).await?;
        tx.commit().await?;
        Ok(Obligation::Bound(prepared))
    }

    /// Checkpoint 4: the delivery (or, for a compensation step, the withdrawal) it asks for.
    #[tracing::instrument(
        name = "adapter.call",
        skip_all,
        fields(adapter = step.adapter.as_deref().unwrap_or_default(), withdrawal = step.withdraws.is_some())
    )]
    async fn call(
        &self,
        step: &Claimed,
        adapter: &dyn Adapter,
        key: &RequestKey,
        prepared: &PreparedRequest,
    ) -> TransportObservation {
        let call = match &step.withdraws {
            None => adapter.deliver(key, prepared),
            Some(target) => Box::pin(async move {
                match adapter.withdraw(key, target).await {
                    WithdrawalObservation::Withdrawn {
                        withdrawal_reference,
                        ..
                    } => TransportObservation::Accepted {
                        status: 201,
                        external_reference: withdrawal_reference,
                        replayed: false,
                        fields: Default::default(),
                    },
                    WithdrawalObservation::Transport(observation) => observation,
                }
            }),
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
        // The lease must still be ours before anything is written; every path below settles
        // the step and so ends the lease in this transaction.
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
                let fields = json!(fields);
                // The receipt keeps a bounded summary: a rule reading a whole body is cut off.
                let fields = if fields.to_string().len() > 3072 {
                    json!({ "omitted": "the typed fields came to more than 3 KiB" })
                } else {
                    fields
                };
                let summary = json!({ "status": status, "replayed": replayed, "fields": fields });
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
    fn settle_after(
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
                if observation.may_retry(contract) && attempts < self.config.retry.max_attempts {
                    Settle::RetryAfter {
                        millis: self.config.retry.backoff_ms(attempts),
                    }
                } else if outcome == AttemptOutcome::Rejected {
                    Settle::Rejected
                } else {
                    Settle::Review
                }
            }
            AttemptOutcome::Succeeded => unreachable!("only an accepted observation succeeds"),
        }
    }
}

/// Checkpoints 2–3 either bound the request (and the call may go) or concluded the attempt.
enum Obligation {
    Bound(PreparedRequest),
    Concluded(StepReport),
}

/// Regenerates the request from the immutable inputs (recovery compares it with the bound one).
pub(crate) async fn prepare(
    conn: &mut PgConnection,
    step: &Claimed,
    key: &RequestKey,
    adapter: &dyn Adapter,
) -> Result<PreparedRequest, WorkerError> {
    let unprepared = |source: PrepareError| WorkerError::Definition {
        step: step.id,
        source: InputError::Invalid(source.0),
    };
    if let Some(target) = &step.withdraws {
        return adapter.prepare_withdrawal(key, target).map_err(unprepared);
    }
    let deps = step::dependency_facts(&mut *conn, step.workflow_id).await?;
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
    let rendered = definition
        .render_request(&step.logical, key.as_str(), &step.workflow_input, &deps)
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
