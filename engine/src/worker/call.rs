//! Checkpoint 4, the call (docs/DESIGN.md §4), outside any transaction: what a worker does with
//! each step of a claimed batch, in a task of its own — a pure step's output, a call, a
//! conclusion without a call, or recovery. Results go to the batch's
//! [`super::conclude::Concluder`] (transaction C), which settles many at once; the task waits
//! for its step's report.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio::sync::oneshot;
use tracing::Instrument;
use uuid::Uuid;

use super::{StepReport, Worker, WorkerError, definition_of};
use crate::adapter::{Adapter, PreparedRequest};
use crate::domain::Authority;
use crate::domain::{RequestKey, StepState, TransportObservation};
use crate::failpoint::{self, FaultPoint};
use crate::store::step::{Claimed, Settle};
use crate::watch::latency;

/// How long before a paced call's moment its checkpoint 3 commits: more than that commit takes
/// on a busy database (a commit waits for the disk), so the call leaves at its moment. A worker
/// killed meanwhile leaves at most this long of the adapter's rate marked sent and unsent, for
/// recovery by its contract.
const CHECKPOINT_LEAD: std::time::Duration = std::time::Duration::from_millis(250);

/// A step taken into a batch.
pub(super) enum Work {
    /// A pure step: its output is rendered here.
    Pure { step: Claimed, facts: Value },
    /// A call to make.
    Call(Call),
    /// An attempt concluded without a call, with what was observed instead.
    Unsent(Call, TransportObservation),
    /// A step whose outcome is unknown: recovery by its contract.
    Recover(Claimed),
    /// A step this worker cannot send (its definition refuses its input): nothing was sent,
    /// and a person decides.
    Unrunnable { step: Claimed, error: WorkerError },
}

/// A fresh external step with its request rendered.
pub(super) struct Call {
    pub step: Claimed,
    pub attempt: Uuid,
    pub key: RequestKey,
    pub prepared: PreparedRequest,
    pub adapter: Arc<dyn Adapter>,
    pub contract_version: i32,
    pub authority: Authority,
    /// Checkpoint 3 has committed: the call may go.
    pub invoked: bool,
    /// Its adapter's limits: the file's, with an approver's override.
    pub limits: crate::domain::Limits,
    /// When the call leaves, if its adapter's rate gave it a moment (docs/DESIGN.md §20).
    pub leave_at: Option<Instant>,
}

/// A result for the concluder, and where its step's report goes.
pub(super) struct Finished {
    pub step: Claimed,
    /// The lease the step was claimed under: only a step still under it is settled.
    pub lease: Uuid,
    pub conclusion: Conclusion,
    pub reply: oneshot::Sender<Result<StepReport, WorkerError>>,
}

/// What a step's attempt came to.
pub(super) enum Conclusion {
    Pure {
        output: Value,
    },
    Observed {
        attempt: Uuid,
        key: RequestKey,
        adapter: Arc<dyn Adapter>,
        observation: TransportObservation,
    },
}

impl Worker {
    /// Checkpoint 4: the delivery (or, for a compensation step, the withdrawal) it asks for.
    #[tracing::instrument(
        name = "adapter.call",
        skip_all,
        fields(adapter = step.adapter.as_deref().unwrap_or_default(), withdrawal = step.withdraws.is_some())
    )]
    pub(super) async fn call_alone(
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

    /// Runs one step of a batch to its report.
    pub(super) async fn execute(
        &self,
        work: Work,
        lease: Uuid,
        claimed_at: Instant,
        conclude: &tokio::sync::mpsc::Sender<Finished>,
    ) -> (Uuid, StepReport) {
        let (id, result) = match work {
            Work::Pure { step, facts } => {
                let id = step.id;
                (id, self.pure(step, lease, &facts, conclude).await)
            }
            Work::Call(call) => {
                let id = call.step.id;
                let span = attempt_span(&call.step);
                let called = self.call(call, lease, claimed_at, conclude);
                (id, called.instrument(span).await)
            }
            Work::Unsent(call, observation) => {
                let id = call.step.id;
                let span = attempt_span(&call.step);
                let conclusion = observed(call.attempt, call.key, call.adapter, observation);
                let result = self
                    .hand_over(call.step, lease, conclusion, conclude)
                    .instrument(span)
                    .await;
                (id, result)
            }
            Work::Recover(step) => {
                let id = step.id;
                let span = attempt_span(&step);
                (id, self.recover(&step, claimed_at).instrument(span).await)
            }
            Work::Unrunnable { step, error } => {
                tracing::error!(step = %step.id, %error, "step cannot run here; nothing was sent");
                let result = self.settle_alone(&step, Settle::Unsent).await;
                (step.id, result.map(|()| StepReport::ToReview))
            }
        };
        (id, self.report(id, result))
    }

    /// A step's result as its report: a lost lease or a stopped pass is reported, not raised.
    fn report(&self, step: Uuid, result: Result<StepReport, WorkerError>) -> StepReport {
        match result {
            Ok(report) => report,
            Err(WorkerError::LeaseLost(_)) => {
                tracing::warn!(%step, "lease lost; another worker owns the step now");
                StepReport::LeaseLost
            }
            // One step's trouble must not abort the others in flight: this step keeps its
            // lease until it expires, and the sweeper hands it on by its checkpoint.
            Err(error) => {
                tracing::error!(%step, %error, "step pass stopped; the sweeper takes over when its lease expires");
                StepReport::Stopped {
                    error: error.to_string(),
                }
            }
        }
    }

    /// A pure step: its output rendered from the input and its dependencies' facts.
    async fn pure(
        &self,
        step: Claimed,
        lease: Uuid,
        facts: &Value,
        conclude: &tokio::sync::mpsc::Sender<Finished>,
    ) -> Result<StepReport, WorkerError> {
        let definition = definition_of(&self.pool, &step).await?;
        let output = match definition.run_pure(&step.logical, &step.workflow_input, facts) {
            Ok(output) => output,
            Err(source) => {
                let error = WorkerError::Definition {
                    step: step.id,
                    source,
                };
                tracing::error!(step = %step.id, %error, "step cannot run here; sent to review");
                self.settle_alone(&step, Settle::Review).await?;
                return Ok(StepReport::ToReview);
            }
        };
        self.hand_over(step, lease, Conclusion::Pure { output }, conclude)
            .await
    }

    /// Checkpoint 4 and what follows: the call, then its observation handed to the concluder.
    async fn call(
        &self,
        call: Call,
        lease: Uuid,
        claimed_at: Instant,
        conclude: &tokio::sync::mpsc::Sender<Finished>,
    ) -> Result<StepReport, WorkerError> {
        // Calls in flight are bounded; a call whose contract needs its own checkpoint 3 takes
        // it only once it may go, so a crash leaves no more steps marked sent and unsent than
        // there are calls in flight. A paced call (docs/DESIGN.md §20) takes its checkpoint 3
        // just before the moment its adapter's rate gave it — a hold taken meanwhile still
        // stops it, and the commit's latency does not shift the send — and its place among the
        // calls in flight at the moment itself, so calls waiting for theirs never delay another.
        let leave_at = call.leave_at;
        let mut permit = None;
        match leave_at {
            Some(at) => {
                let lead = at.checked_sub(CHECKPOINT_LEAD).unwrap_or(at);
                tokio::time::sleep_until(lead.into()).await;
            }
            None => permit = Some(self.calls.acquire().await),
        }
        let call = if call.invoked {
            call
        } else {
            let id = call.step.id;
            match self.invoke_batch(vec![call]).await? {
                (mut going, _) if !going.is_empty() => going.remove(0),
                (_, 0) => return Err(guard_lost(id)),
                (_, _) => return Ok(StepReport::Held),
            }
        };
        failpoint::hit(FaultPoint::AfterObligationCommit);
        if let Some(at) = leave_at {
            tokio::time::sleep_until(at.into()).await;
            permit = Some(self.calls.acquire().await);
        }
        let adapter_name = call.step.adapter.clone().unwrap_or_default();
        latency::claim_to_send(&adapter_name, claimed_at.elapsed());
        let sent = Instant::now();
        let observation = send(&call).await;
        drop(permit);
        latency::adapter_call(&adapter_name, observation.outcome(), sent.elapsed());
        failpoint::hit(if call.step.withdraws.is_some() {
            FaultPoint::DuringCompensationAcceptance
        } else {
            FaultPoint::AfterResponseBeforeObservation
        });
        let succeeded_from = claimed_at;
        let report = self
            .hand_over(
                call.step.clone(),
                lease,
                observed(call.attempt, call.key, call.adapter, observation),
                conclude,
            )
            .await?;
        if let StepReport::Settled {
            state: StepState::Succeeded,
            ..
        } = &report
        {
            latency::ready_to_receipt(&adapter_name, succeeded_from.elapsed());
        }
        Ok(report)
    }

    /// Hands a result to the concluder and waits for the flush that settles it.
    #[tracing::instrument(name = "checkpoint.conclude", skip_all)]
    async fn hand_over(
        &self,
        step: Claimed,
        lease: Uuid,
        conclusion: Conclusion,
        conclude: &tokio::sync::mpsc::Sender<Finished>,
    ) -> Result<StepReport, WorkerError> {
        let (reply, report) = oneshot::channel();
        let finished = Finished {
            step,
            lease,
            conclusion,
            reply,
        };
        if let Err(unsent) = conclude.send(finished).await {
            // The concluder has stopped (the worker is shutting down): settle it here.
            let finished = unsent.0;
            return self
                .conclude_alone(finished.step, finished.conclusion)
                .await;
        }
        report
            .await
            .unwrap_or_else(|_| Err(WorkerError::Stopped("the concluder stopped".into())))
    }
}

/// The span of one step's attempt: with tracing on, each attempt is one trace, its call and
/// its conclusion the spans inside (the claim is the batch's).
fn attempt_span(step: &Claimed) -> tracing::Span {
    tracing::info_span!(
        "step.attempt",
        step = %step.id,
        workflow = %step.workflow_id,
        logical = %step.logical,
        adapter = step.adapter.as_deref().unwrap_or_default(),
        attempt = step.attempt_count,
    )
}

/// The conclusion of an attempt that observed `observation`.
fn observed(
    attempt: Uuid,
    key: RequestKey,
    adapter: Arc<dyn Adapter>,
    observation: TransportObservation,
) -> Conclusion {
    Conclusion::Observed {
        attempt,
        key,
        adapter,
        observation,
    }
}

/// A call whose checkpoint 3 did not commit: its lease was lost before the send.
fn guard_lost(step: Uuid) -> WorkerError {
    WorkerError::LeaseLost(crate::store::guard::LeaseLost { step })
}

/// The delivery (or, for a compensation step, the withdrawal) the call asks for.
#[tracing::instrument(
    name = "adapter.call",
    skip_all,
    fields(adapter = call.step.adapter.as_deref().unwrap_or_default(), withdrawal = call.step.withdraws.is_some())
)]
async fn send(call: &Call) -> TransportObservation {
    let adapter = call.adapter.as_ref();
    match &call.step.withdraws {
        None => adapter.deliver(&call.key, &call.prepared).await,
        Some(target) => adapter.withdraw(&call.key, target).await.into_transport(),
    }
}
