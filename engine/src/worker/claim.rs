//! Checkpoints 1–3 for a batch (docs/DESIGN.md §4), transaction A of a few set-based
//! statements: the due steps are locked and read, their requests rendered here, and then the
//! batch is leased, its request identities bound and its attempts recorded. Steps whose
//! contract makes a blind resend safe (an idempotency key the destination honours) go to the
//! call straight from this commit; the others get checkpoint 3 of their own just before their
//! send (transaction B, `identity.rs`), once a call may go. Authority is decided by
//! `domain::Authority` from the suspensions read in this transaction.

use serde_json::Value;
use uuid::Uuid;

use std::sync::Arc;

use super::call::{Call, Work};
use super::identity::Withheld;
use super::{Worker, WorkerError, adapter_for, definition_of, request_key};
use crate::adapter::Adapter;
use crate::adapter::registry::Adapters;
use crate::domain::StepKind;
use crate::domain::{Authority, Suspension};
use crate::domain::{StepState, TransportObservation, UnknownOutcomePolicy};
use crate::store::attempt;
use crate::store::batch::{self, Taken, Taking};

use crate::store::step::Claimed;

/// How long a step waits in the queue when its adapter's file does not build in this worker
/// (a secret not set here), for a worker where it does.
const NOT_BUILT_HERE_SECS: f64 = 30.0;

/// How long a step in recovery waits before it is looked at again while its adapter is held.
const HELD_LOOKUP_SECS: f64 = 5.0;

/// A due step as the claim judged it, before the batch is taken.
pub(super) enum Judged {
    Pure {
        step: Claimed,
        facts: Value,
    },
    Recover(Claimed),
    Call(Box<Call>),
    Unrunnable {
        step: Claimed,
        error: WorkerError,
    },
    /// Its adapter's current version may send nothing, or its workflow is paused: the step
    /// waits, held, unsent.
    Held(Claimed),
    /// Put off for a number of seconds, untaken: its adapter does not build in this worker, an
    /// operator's hold keeps its lookups, or its adapter's limits keep it back.
    Postponed(Claimed, f64),
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
        let mut adapters = self.adapters();
        let mut judged = Vec::with_capacity(due.len());
        for d in due {
            judged.push(self.judge(&mut tx, d, &suspensions, &mut adapters).await?);
        }
        let judged = self.pace(&mut tx, lease, judged).await?;
        let (postponed, secs): (Vec<Uuid>, Vec<f64>) = judged
            .iter()
            .filter_map(|j| match j {
                Judged::Postponed(step, after) => Some((step.id, *after)),
                _ => None,
            })
            .unzip();
        if !postponed.is_empty() {
            batch::postpone(&mut tx, &postponed, &secs).await?;
        }
        let (held, judged): (Vec<Judged>, Vec<Judged>) = judged
            .into_iter()
            .filter(|j| !matches!(j, Judged::Postponed(..)))
            .partition(|j| matches!(j, Judged::Held(_)));
        let takings: Vec<Taking> = judged.iter().map(taking).collect();
        let taken = if takings.is_empty() {
            Vec::new()
        } else {
            batch::take(&mut tx, lease, self.name(), self.lease_secs(), &takings).await?
        };
        tx.commit().await?;
        if !held.is_empty() {
            let held: Vec<&Claimed> = held
                .iter()
                .filter_map(|j| match j {
                    Judged::Held(step) => Some(step),
                    _ => None,
                })
                .collect();
            self.hold_steps(&held, Withheld::AtClaim).await?;
        }
        Ok((lease, self.works(judged, &taken)))
    }

    /// What the claim does with one due step: render its request (checkpoint 2's decision
    /// too, for a step about to be sent), hand it to recovery, or leave it waiting when its
    /// adapter may not send. Adapters the database has newer than this worker are reloaded
    /// first, so a step is never judged by a version intake did not use.
    async fn judge(
        &self,
        conn: &mut sqlx::PgConnection,
        due: batch::Due,
        suspensions: &[Suspension],
        adapters: &mut Arc<Adapters>,
    ) -> Result<Judged, WorkerError> {
        let batch::Due {
            step,
            facts,
            adapter,
            paused,
        } = due;
        let overridden = adapter.map(|gate| gate.limits).unwrap_or_default();
        if paused && step.state == StepState::Ready {
            // An operator paused the workflow: the step waits held (docs/DESIGN.md §20).
            return Ok(Judged::Held(step));
        }
        if step.kind == StepKind::Pure {
            return Ok(Judged::Pure { step, facts });
        }
        if let Some(gate) = adapter {
            let name = step.adapter.as_deref().unwrap_or_default();
            if adapters
                .loaded(name)
                .is_none_or(|l| l.version < gate.version)
            {
                *adapters = self.reload_adapters().await?;
            }
            if step.state == StepState::Ready && !gate.may_send {
                return Ok(Judged::Held(step));
            }
            if step.state == StepState::OutcomeUnknown && gate.lookups_held {
                // Held by an operator: no lookup leaves either; the step keeps its state and
                // is looked at again after the hold (docs/DESIGN.md §20).
                return Ok(Judged::Postponed(step, HELD_LOOKUP_SECS));
            }
            if adapters.loaded(name).is_none() {
                tracing::warn!(step = %step.id, adapter = name, "adapter not built in this worker; the step waits");
                return Ok(Judged::Postponed(step, NOT_BUILT_HERE_SECS));
            }
        }
        if step.state == StepState::OutcomeUnknown {
            return Ok(Judged::Recover(step));
        }
        match self
            .render(conn, &step, &facts, suspensions, adapters)
            .await
        {
            Ok(mut call) => {
                call.limits = call.adapter.limits().overridden_by(overridden);
                Ok(Judged::Call(Box::new(call)))
            }
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
        suspensions: &[Suspension],
        adapters: &Adapters,
    ) -> Result<Call, WorkerError> {
        let (adapter, contract_version) = adapter_for(adapters, step)?;
        let key = request_key(step);
        let definition = definition_of(&mut *conn, step).await?;
        let prepared =
            super::identity::render_with(step, &key, adapter.as_ref(), &definition, facts)?;
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
            limits: crate::domain::Limits::default(),
            leave_at: None,
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
                    | Judged::Unrunnable { step, .. }
                    | Judged::Held(step)
                    | Judged::Postponed(step, _) => step.id,
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
                    Judged::Held(_) | Judged::Postponed(..) => {
                        unreachable!("held and postponed steps are not taken")
                    }
                })
            })
            .collect()
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
        Judged::Pure { step, .. }
        | Judged::Recover(step)
        | Judged::Unrunnable { step, .. }
        | Judged::Held(step)
        | Judged::Postponed(step, _) => Taking {
            step: step.id,
            ..Taking::default()
        },
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
