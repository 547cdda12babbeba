//! Checkpoints 1–3 for a batch (docs/DESIGN.md §4), in one transaction of a few set-based
//! statements: the due steps are locked and read, their requests rendered here, and then the
//! batch is leased, its request identities bound and its attempts recorded. Steps whose
//! contract makes a blind resend safe (an idempotency key the destination honours) go to the
//! call straight from this commit; the others get checkpoint 3 of their own just before their
//! send ([`Worker::invoke_batch`]), once a call may go.

use serde_json::Value;
use uuid::Uuid;

use super::work::{Call, Work};
use super::{Worker, WorkerError, adapter_for, definition_of, request_key};
use crate::adapter::Adapter;
use crate::definition::StepKind;
use crate::domain::{StepState, TransportObservation, UnknownOutcomePolicy};
use crate::store::attempt::{self, Authority};
use crate::store::batch::{self, Taken, Taking};
use crate::store::step::Claimed;

/// A due step as the claim judged it, before the batch is taken.
enum Judged {
    Pure { step: Claimed, facts: Value },
    Recover(Claimed),
    Call(Box<Call>),
    Unrunnable { step: Claimed, error: WorkerError },
}

impl Worker {
    /// Claims up to `limit` due steps as one batch under a lease of their own; returns the
    /// lease and what to do with each step.
    #[tracing::instrument(name = "checkpoint.claim", skip_all)]
    pub(super) async fn claim_batch(&self, limit: i64) -> Result<(Uuid, Vec<Work>), WorkerError> {
        let lease = Uuid::now_v7();
        let mut tx = self.pool.begin().await?;
        let due = batch::claim_due(&mut tx, limit).await?;
        if due.is_empty() {
            tx.commit().await?;
            return Ok((lease, Vec::new()));
        }
        let suspensions = if due.iter().any(|d| d.step.state == StepState::Ready) {
            attempt::suspensions(&mut tx).await?
        } else {
            Vec::new()
        };
        let mut judged = Vec::with_capacity(due.len());
        for d in due {
            judged.push(self.judge(&mut tx, d.step, d.facts, &suspensions).await?);
        }
        let takings: Vec<Taking> = judged.iter().map(taking).collect();
        let taken = batch::take(&mut tx, lease, self.name(), self.lease_secs(), &takings).await?;
        tx.commit().await?;
        Ok((lease, self.works(judged, &taken)))
    }

    /// What the claim does with one due step: render its request (checkpoint 2's decision
    /// too, for a step about to be sent), or hand it to recovery.
    async fn judge(
        &self,
        conn: &mut sqlx::PgConnection,
        step: Claimed,
        facts: Value,
        suspensions: &[(String, String, String)],
    ) -> Result<Judged, WorkerError> {
        if step.kind == StepKind::Pure {
            return Ok(Judged::Pure { step, facts });
        }
        if step.state == StepState::OutcomeUnknown {
            return Ok(Judged::Recover(step));
        }
        match self.render(conn, &step, &facts, suspensions).await {
            Ok(call) => Ok(Judged::Call(Box::new(call))),
            Err(error @ (WorkerError::UnknownAdapter { .. } | WorkerError::Definition { .. })) => {
                Ok(Judged::Unrunnable { step, error })
            }
            Err(error) => Err(error),
        }
    }

    /// The request of a fresh external step, with the authority decision for it now.
    async fn render(
        &self,
        conn: &mut sqlx::PgConnection,
        step: &Claimed,
        facts: &Value,
        suspensions: &[(String, String, String)],
    ) -> Result<Call, WorkerError> {
        let (adapter, contract_version) = adapter_for(&self.adapters, step)?;
        let key = request_key(step);
        let definition = definition_of(&mut *conn, step).await?;
        let prepared =
            super::invoke::render_with(step, &key, adapter.as_ref(), &definition, facts)?;
        let subject =
            definition
                .subject(&step.workflow_input)
                .map_err(|source| WorkerError::Definition {
                    step: step.id,
                    source,
                })?;
        let adapter_name = step.adapter.as_deref().unwrap_or_default();
        let authority = Authority::decide(suspensions, adapter_name, &subject);
        let invoke_now = sends_at_once(adapter.as_ref());
        Ok(Call {
            step: step.clone(),
            attempt: Uuid::now_v7(),
            key,
            prepared,
            adapter,
            contract_version,
            authority,
            invoked: invoke_now,
        })
    }

    /// The judged steps, as the batch took them.
    fn works(&self, judged: Vec<Judged>, taken: &[Taken]) -> Vec<Work> {
        judged
            .into_iter()
            .filter_map(|j| {
                let id = match &j {
                    Judged::Pure { step, .. }
                    | Judged::Recover(step)
                    | Judged::Unrunnable { step, .. } => step.id,
                    Judged::Call(call) => call.step.id,
                };
                let taken = taken.iter().find(|t| t.step == id)?;
                Some(match j {
                    Judged::Pure { mut step, facts } => {
                        step.attempt_count = taken.attempt_count;
                        Work::Pure { step, facts }
                    }
                    Judged::Recover(step) => Work::Recover(step),
                    Judged::Unrunnable { step, error } => Work::Unrunnable { step, error },
                    Judged::Call(call) => called(*call, taken),
                })
            })
            .collect()
    }

    /// Checkpoint 3 for calls that waited for it: one statement, just before they are sent.
    /// Returns the calls that may go; the others lost their lease.
    pub(super) async fn invoke_batch(&self, calls: Vec<Call>) -> Result<Vec<Call>, WorkerError> {
        if calls.is_empty() {
            return Ok(calls);
        }
        let steps: Vec<Uuid> = calls.iter().map(|c| c.step.id).collect();
        let attempts: Vec<Uuid> = calls.iter().map(|c| c.attempt).collect();
        let authority: Vec<Value> = calls.iter().map(|c| c.authority.record.clone()).collect();
        let mut tx = self.pool.begin().await?;
        let invoked = batch::invoke(&mut tx, self.name(), &steps, &attempts, &authority).await?;
        tx.commit().await?;
        Ok(calls
            .into_iter()
            .filter_map(|mut call| {
                let (_, count) = invoked.iter().find(|(id, _)| *id == call.step.id)?;
                call.step.attempt_count = *count;
                call.step.state = StepState::Invoking;
                call.invoked = true;
                Some(call)
            })
            .collect())
    }
}

/// Whether a step of `adapter` may be recorded as sent in the claim's own commit: only when a
/// crash before the send is recovered by sending again under the same key, which the
/// destination answers once. Any other contract would read such a crash as a call that may
/// have happened, and send the step to review, or to a lookup, for nothing.
fn sends_at_once(adapter: &dyn Adapter) -> bool {
    let contract = adapter.contract();
    contract.accepts_idempotency_key
        && contract.unknown_outcome_policy == UnknownOutcomePolicy::Query
}

/// How the batch takes a judged step.
fn taking(judged: &Judged) -> Taking {
    match judged {
        Judged::Pure { step, .. } | Judged::Recover(step) | Judged::Unrunnable { step, .. } => {
            Taking {
                step: step.id,
                ..Taking::default()
            }
        }
        Judged::Call(call) => Taking {
            step: call.step.id,
            attempt: Some(call.attempt),
            key: Some(call.key.as_str().to_owned()),
            digest: Some(call.prepared.request_digest.to_string()),
            summary: Some(call.prepared.summary.clone()),
            adapter: call.step.adapter.clone(),
            contract_version: Some(call.contract_version),
            invoke_now: call.invoked,
            authority: Some(call.authority.record.clone()),
        },
    }
}

/// A call as the batch took it: sent at once, sent after its own checkpoint 3, or concluded
/// without a call (authority denied, a request that no longer regenerates identically).
fn called(mut call: Call, taken: &Taken) -> Work {
    call.step.attempt_count = taken.attempt_count;
    call.step.state = taken.state;
    if let Some(reason) = call.authority.denied.clone() {
        return Work::Unsent(call, TransportObservation::AuthorityDenied { reason });
    }
    if !taken.same_request {
        let observation = TransportObservation::RequestDiverged {
            bound: taken.bound_digest.clone().unwrap_or_default(),
            regenerated: call.prepared.request_digest.to_string(),
        };
        return Work::Unsent(call, observation);
    }
    call.invoked = taken.state == StepState::Invoking;
    Work::Call(call)
}
