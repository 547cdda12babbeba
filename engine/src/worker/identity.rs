//! Checkpoint 3, the request identity (docs/DESIGN.md §4, §2): transaction B, one statement per
//! group of calls that waited for it, just before they are sent ([`Worker::invoke_batch`]); the
//! same checkpoint with checkpoint 2 for one step, a recovery's new attempt under the same key
//! ([`Worker::bind_obligation`]); the request a step is sent under, regenerated from its
//! immutable inputs ([`prepare`]) and bound where a restore lost its identity
//! ([`bind_regenerated`]); and the claimed steps that may not start after all, held at the claim
//! or at checkpoint 3 ([`Worker::hold_steps`], docs/DESIGN.md §20).

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::call::Call;
use super::{StepReport, Worker, WorkerError, definition_of};
use crate::adapter::{Adapter, PrepareError, PreparedRequest};
use crate::definition::{Definition, InputError};
use crate::domain::{RequestKey, StepState, TransportObservation};
use crate::failpoint::{self, BrokenRule};
use crate::store::step::{self, Claimed};
use crate::store::{attempt, batch, conclusion, request};

impl Worker {
    /// Checkpoint 3 for calls that waited for it: one statement, just before they are sent.
    /// Returns the calls that may go, and how many were held instead: their adapter was held,
    /// or their workflow paused, since they were claimed (docs/DESIGN.md §20). The others
    /// lost their lease.
    pub(super) async fn invoke_batch(
        &self,
        calls: Vec<Call>,
    ) -> Result<(Vec<Call>, usize), WorkerError> {
        if calls.is_empty() {
            return Ok((calls, 0));
        }
        let steps: Vec<Uuid> = calls.iter().map(|c| c.step.id).collect();
        let attempts: Vec<Uuid> = calls.iter().map(|c| c.attempt).collect();
        let authority: Vec<Value> = calls.iter().map(|c| c.authority.record.clone()).collect();
        let mut tx = self.pool.begin().await?;
        let invoked = batch::invoke(&mut tx, self.name(), &steps, &attempts, &authority).await?;
        tx.commit().await?;
        let stopped: Vec<&Claimed> = calls
            .iter()
            .filter(|c| invoked.iter().all(|(id, _)| *id != c.step.id))
            .map(|c| &c.step)
            .collect();
        let withheld = if stopped.is_empty() {
            0
        } else {
            self.hold_steps(&stopped, Withheld::BeforeSend).await?
        };
        let going = calls
            .into_iter()
            .filter_map(|mut call| {
                let (_, count) = invoked.iter().find(|(id, _)| *id == call.step.id)?;
                call.step.attempt_count = *count;
                call.step.state = StepState::Invoking;
                call.invoked = true;
                Some(call)
            })
            .collect();
        Ok((going, withheld))
    }

    /// Holds `steps`, whose adapter may send nothing now or whose workflow is paused, in a
    /// transaction of their own that locks their workflows first (as a flush does); `when`
    /// says which steps the store may take. Returns how many it held.
    pub(super) async fn hold_steps(
        &self,
        steps: &[&Claimed],
        when: Withheld,
    ) -> Result<usize, WorkerError> {
        let ids: Vec<Uuid> = steps.iter().map(|s| s.id).collect();
        let mut owners: Vec<Uuid> = steps.iter().map(|s| s.workflow_id).collect();
        owners.sort_unstable();
        owners.dedup();
        let mut tx = self.pool.begin().await?;
        conclusion::lock_workflows(&mut tx, &owners).await?;
        let held = match when {
            Withheld::AtClaim => crate::store::held::hold(&mut tx, &ids).await?,
            Withheld::BeforeSend => {
                crate::store::held::withhold(&mut tx, self.name(), &ids).await?
            }
        };
        tx.commit().await?;
        if held > 0 {
            tracing::info!(steps = held, "{}", when.sentence());
        }
        Ok(held)
    }

    /// Checkpoints 2 and 3: authority, then the request identity, before any byte is sent. A
    /// denied authority or a request that no longer regenerates identically concludes the
    /// attempt here, in the same transaction, without a call.
    #[tracing::instrument(name = "checkpoint.obligation", skip_all)]
    pub(super) async fn bind_obligation(
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
}

/// Checkpoints 2–3 either bound the request (and the call may go) or concluded the attempt.
pub(super) enum Obligation {
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

/// When the worker finds that a claimed step may not start (docs/DESIGN.md §20).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Withheld {
    /// At the claim: the step is still ready and was never leased.
    AtClaim,
    /// At checkpoint 3, for a step this worker leased and did not send: its adapter was held,
    /// or its workflow paused, since the claim.
    BeforeSend,
}

impl Withheld {
    fn sentence(self) -> &'static str {
        match self {
            Withheld::AtClaim => {
                "held: their adapter may not send (its version is not verified, or an operator holds it), or their workflow is paused"
            }
            Withheld::BeforeSend => {
                "held before sending: their adapter was held or their workflow paused after the claim"
            }
        }
    }
}
