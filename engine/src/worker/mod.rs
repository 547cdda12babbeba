//! Workers: each step through the checkpoint protocol of docs/DESIGN.md §4, with no network
//! call inside a transaction, and recovery of steps whose outcome is unknown by the adapter's
//! contract (docs/DESIGN.md §6). The table is DESIGN §4's (`make lint` keeps them equal):
//!
//! | tx | checkpoints | file | what commits |
//! |---|---|---|---|
//! | A, per batch | 1 claim, 2 authority, 3 identity | `worker/claim.rs` | the batch leased, each request identity bound, each attempt recorded with its authority decision (`domain::Authority`); a step whose key makes a blind resend safe is `invoking` at this commit |
//! | B, per call | 3 identity | `worker/identity.rs` | for every other external step, just before its send: `invoking`, its request marked sent |
//! | — | 4 call | `worker/call.rs` | nothing: the call runs outside any transaction, its lease renewed meanwhile |
//! | C, per flush | 5 observation, 6 receipt | `worker/conclude/` | the observation or the receipt, the step's next state, dependants released, the events and the workflow's state, the status projection |
//!
//! Around them: `pipeline.rs` runs claims, calls and conclusions at once; `leases.rs` keeps
//! the leases of batches in flight; `recover.rs` and `lookup.rs` are a step found in
//! `outcome_unknown` (§6), one step at a time through the same checkpoints
//! (`identity.rs`, `call.rs`, `conclude/alone.rs`). Operators reach the worker only through
//! its public services: [`check_destination`] and [`bind_regenerated_for`].

mod call;
mod claim;
mod conclude;
mod identity;
mod leases;
mod lookup;
mod pace;
mod pipeline;
mod recover;

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::adapter::Adapter;
use crate::adapter::registry::Adapters;
use crate::definition::{self, Catalog, CatalogError, Definition};
use crate::domain::{AttemptOutcome, RequestKey, StepKey, StepState};
use crate::store::guard::{self, GuardedError};
use crate::store::lease;
use crate::store::step::{self, Claimed, Settle};
use crate::store::workflow;

pub use identity::bind_regenerated_for;
pub use lookup::{Hold, check_destination};

/// How safe retries (nothing committed, or a retryable rejection) back off, per step.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts after which a step that keeps failing before effect goes to review.
    pub max_attempts: i32,
    pub base: Duration,
    pub cap: Duration,
}

impl RetryPolicy {
    fn backoff_ms(&self, attempt: i32) -> i64 {
        let exp = u32::try_from(attempt.saturating_sub(1))
            .unwrap_or(0)
            .min(20);
        let ms = self
            .base
            .as_millis()
            .saturating_mul(1 << exp)
            .min(self.cap.as_millis());
        i64::try_from(ms).unwrap_or(i64::MAX)
    }
}

/// Tuning of one worker process.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Names this worker in leases and attempts.
    pub name: String,
    /// Steps claimed per transaction.
    pub batch: i64,
    /// Steps in flight at once.
    pub concurrency: usize,
    /// How long a lease lasts without renewal.
    pub lease: Duration,
    /// How long to wait when nothing is due.
    pub idle_poll: Duration,
    /// How long automatic recovery may try before a person must decide.
    pub recovery_window: Duration,
    /// How often the semantic invariants are checked, by whichever of the worker processes
    /// sharing the database takes the turn (the `invariant_pass` maintenance service).
    pub invariant_interval: Duration,
    /// How often the `adapter_refresh` maintenance service looks for adapters applied,
    /// changed, verified or demoted since they were loaded, and reloads them from the
    /// database; never when `None` (a worker given adapters of its own, as the tests and the
    /// bench do).
    pub adapter_refresh: Option<Duration>,
    pub retry: RetryPolicy,
}

impl WorkerConfig {
    /// Defaults suitable for the console demo and the tests.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            batch: 32,
            concurrency: 16,
            lease: Duration::from_secs(30),
            idle_poll: Duration::from_millis(250),
            recovery_window: Duration::from_secs(15 * 60),
            invariant_interval: Duration::from_secs(30),
            adapter_refresh: None,
            retry: RetryPolicy {
                max_attempts: 5,
                base: Duration::from_millis(200),
                cap: Duration::from_secs(30),
            },
        }
    }
}

/// Errors that stop a worker pass (a lost lease does not: it is logged and skipped).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    /// Another worker (or the sweeper) owns the step now; this worker changed nothing.
    #[error(transparent)]
    LeaseLost(#[from] guard::LeaseLost),
    #[error("step {step} names adapter `{adapter}`, which is not registered")]
    UnknownAdapter { step: Uuid, adapter: String },
    #[error("step {step}: {source}")]
    Definition {
        step: Uuid,
        source: definition::InputError,
    },
    /// The worker is stopping: the step's lease expires and the sweeper hands it on.
    #[error("{0}")]
    Stopped(String),
}

impl From<GuardedError> for WorkerError {
    fn from(e: GuardedError) -> Self {
        match e {
            GuardedError::Sqlx(e) => WorkerError::Sqlx(e),
            GuardedError::LeaseLost(lost) => WorkerError::LeaseLost(lost),
        }
    }
}

/// What a pass did with one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepReport {
    PureCompleted,
    Settled {
        outcome: AttemptOutcome,
        state: StepState,
    },
    Looked {
        answer: String,
        state: StepState,
    },
    ToReview,
    LeaseLost,
    /// Claimed, then not sent: its adapter was held, or its workflow paused, before the call
    /// could go; it waits held (docs/DESIGN.md §20).
    Held,
    /// The pass stopped on an error (logged); the lease expires and the sweeper takes over.
    Stopped {
        error: String,
    },
}

/// A worker: claims due steps and drives each through the protocol.
#[derive(Clone)]
pub struct Worker {
    pool: PgPool,
    config: Arc<WorkerConfig>,
    /// The adapters as this process last loaded them, shared by every clone: a claim that
    /// finds the database ahead of them reloads them for all.
    adapters: Arc<std::sync::RwLock<Arc<Adapters>>>,
    /// Calls in flight at once (`WorkerConfig::concurrency`).
    calls: Arc<tokio::sync::Semaphore>,
}

impl Worker {
    /// A worker over `pool` calling `adapters`. Its lease holder name gets a random suffix, so
    /// two processes configured with one name can never pass for each other. A concurrency of 0
    /// counts as 1.
    pub fn new(pool: PgPool, mut config: WorkerConfig, adapters: Adapters) -> Self {
        config.name = lease_holder(&config.name);
        config.concurrency = config.concurrency.max(1);
        Self {
            pool,
            calls: Arc::new(tokio::sync::Semaphore::new(config.concurrency)),
            config: Arc::new(config),
            adapters: Arc::new(std::sync::RwLock::new(Arc::new(adapters))),
        }
    }

    /// The adapters as this process holds them now.
    fn adapters(&self) -> Arc<Adapters> {
        self.adapters
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Loads the adapters again from the database, for every clone of this worker.
    pub(crate) async fn reload_adapters(&self) -> sqlx::Result<Arc<Adapters>> {
        let loaded = Arc::new(Adapters::load(&self.pool).await?);
        *self
            .adapters
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = loaded.clone();
        Ok(loaded)
    }

    /// How this worker was configured.
    pub(crate) fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// The database this worker works on.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The lease holder name this worker writes.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// How long this worker's leases last without renewal.
    pub fn lease(&self) -> Duration {
        self.config.lease
    }

    /// Calls holding a slot: about to be sent, or waiting for their answer.
    fn calls_in_flight(&self) -> usize {
        self.config
            .concurrency
            .saturating_sub(self.calls.available_permits())
    }

    fn lease_secs(&self) -> f64 {
        self.config.lease.as_secs_f64()
    }

    /// This worker's lease, as the lookup and receipt code that operators share reads it.
    fn hold(&self) -> Hold<'_> {
        Hold {
            pool: &self.pool,
            holder: &self.config.name,
            lease: self.config.lease,
            adapters: self.adapters(),
            now: None,
        }
    }

    /// Runs until `shutdown` resolves: claims a batch whenever a whole one fits in flight; on
    /// shutdown, claims no more and lets every step in flight finish its protocol. The lease
    /// sweeper, the invariant pass and the adapter refresh run beside it as maintenance
    /// services ([`crate::maintenance::run_worker`] runs them together).
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let lanes = self.start_lanes();
        let mut tasks = JoinSet::new();
        let batch = usize::try_from(self.config.batch.max(1)).unwrap_or(64);
        let capacity = batch * 2;
        loop {
            tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = std::future::ready(()) => {}
            }
            while tasks.try_join_next().is_some() {}
            let room = capacity.saturating_sub(tasks.len());
            let claimed = if room >= batch {
                let limit = i64::try_from(batch).unwrap_or(i64::MAX);
                match self.take_batch(&lanes, limit, &mut tasks).await {
                    Ok(claimed) => claimed,
                    Err(error) => {
                        tracing::warn!(%error, worker = %self.config.name, "claim failed; retrying");
                        0
                    }
                }
            } else {
                0
            };
            if claimed == 0 {
                tokio::select! {
                    () = &mut shutdown => break,
                    Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
                    () = tokio::time::sleep(self.config.idle_poll) => {}
                }
            }
        }
        while tasks.join_next().await.is_some() {}
        self.stop_lanes(lanes).await;
    }

    /// One pass, to completion: sweep, claim up to a batch, and run every step of it through
    /// the protocol; returns each step's report.
    pub async fn run_once(&self) -> Result<Vec<(Uuid, StepReport)>, WorkerError> {
        self.sweep().await?;
        let lanes = self.start_lanes();
        let mut tasks = JoinSet::new();
        let claimed = self.take_batch(&lanes, self.config.batch, &mut tasks).await;
        let mut reports = Vec::new();
        while let Some(done) = tasks.join_next().await {
            reports.push(done.expect("a step task does not panic"));
        }
        self.stop_lanes(lanes).await;
        claimed?;
        Ok(reports)
    }

    /// Ends what the holders of expired leases left unfinished: steps not yet sent are ready
    /// again, steps that may have been sent go to recovery.
    pub async fn sweep(&self) -> Result<(), WorkerError> {
        let mut tx = self.pool.begin().await?;
        let reclaimed = lease::reclaim_expired(&mut tx).await?;
        for (_, workflow_id) in &reclaimed.to_recovery {
            workflow::refresh_state(&mut tx, *workflow_id).await?;
        }
        // A step held in the moment its adapter was verified was not released with the others.
        crate::store::held::release(&mut tx, crate::store::held::Releasing::All, None).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Settles a step this worker holds, in a transaction of its own.
    #[tracing::instrument(name = "checkpoint.settle", skip_all)]
    async fn settle_alone(&self, step: &Claimed, settle: Settle) -> Result<(), WorkerError> {
        let mut tx = self.pool.begin().await?;
        step::settle(&mut tx, step.id, Some(&self.config.name), settle).await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// A lease holder name for `name` with a random suffix: two holders given one name (two worker
/// processes, two consoles signed in as one operator) can never pass for each other.
pub fn lease_holder(name: &str) -> String {
    format!("{name}#{}", &Uuid::new_v4().simple().to_string()[..8])
}

/// The step's request key: the one persisted, or the one its identity derives.
pub(crate) fn request_key(step: &Claimed) -> RequestKey {
    step.request_key
        .clone()
        .map(RequestKey::from)
        .unwrap_or_else(|| {
            RequestKey::derive(
                step.workflow_id,
                &StepKey::new(step.logical.clone(), step.definition_version),
            )
        })
}

/// The adapter `step` names, with the contract version it is registered under.
pub(crate) fn adapter_for(
    adapters: &Adapters,
    step: &Claimed,
) -> Result<(Arc<dyn Adapter>, i32), WorkerError> {
    let name = step.adapter.as_deref().unwrap_or_default();
    adapters
        .get(name)
        .ok_or_else(|| WorkerError::UnknownAdapter {
            step: step.id,
            adapter: name.to_owned(),
        })
}

/// The state a step is left in by `settle`.
fn settled_state(settle: Settle) -> StepState {
    match settle {
        Settle::RetryAfter { .. } => StepState::Ready,
        Settle::Unknown { .. } => StepState::OutcomeUnknown,
        Settle::Review => StepState::ReviewRequired,
        Settle::Unsent => StepState::Unsent,
        Settle::Rejected => StepState::Rejected,
    }
}

/// The definition (at the version the workflow started with) the step belongs to.
pub(crate) async fn definition_of<'e, E>(
    executor: E,
    step: &Claimed,
) -> Result<Arc<Definition>, WorkerError>
where
    E: sqlx::Executor<'e, Database = sqlx::Postgres>,
{
    Catalog::get(executor, &step.definition_name, step.definition_version)
        .await
        .map_err(|e| match e {
            CatalogError::Sqlx(e) => WorkerError::Sqlx(e),
            CatalogError::Unknown(source) => WorkerError::Definition {
                step: step.id,
                source,
            },
            broken @ CatalogError::Broken { .. } => WorkerError::Definition {
                step: step.id,
                source: definition::InputError::Invalid(broken.to_string()),
            },
        })
}
