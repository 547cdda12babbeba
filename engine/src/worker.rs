//! Workers: each step through the six checkpoints of DESIGN.md, with no network call inside a
//! transaction, and recovery of steps whose outcome is unknown by the adapter's contract.
//!
//! 1. claim (lease + attempt) · 2. authority · 3. request identity, `invoking` ·
//! 4. the call, outside any transaction · 5. observation · 6. receipt, dependants, outbox.
//!
//! Checkpoints 2–3 share a transaction, as do 5–6: neither pair has a network call between.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::adapter::{Adapter, BoxFuture, HttpAdapter, LookupObservation, WithdrawalObservation};
use crate::contract_suite::{self, SuiteReport};
use crate::definition::{self, DocumentDeliveryInput, PreparedRequest, StepKind};
use crate::domain::{
    AttemptOutcome, LookupAnswer, RecoveryDecision, RequestKey, StepKey, StepState,
    TransportObservation, UnknownOutcomeFacts, decide_after_unknown,
};
use crate::store::step::{self, Claimed, GuardedError, NewReceipt, ReceiptOutcome, Settle};
use crate::store::{adapter as adapter_store, workflow};

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
    /// How often [`Worker::run`] checks the semantic invariants.
    pub invariant_interval: Duration,
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
    LeaseLost(#[from] step::LeaseLost),
    #[error("step {step} names adapter `{adapter}`, which is not registered")]
    UnknownAdapter { step: Uuid, adapter: String },
    #[error("step {step}: {source}")]
    Definition {
        step: Uuid,
        source: definition::InputError,
    },
}

impl From<GuardedError> for WorkerError {
    fn from(e: GuardedError) -> Self {
        match e {
            GuardedError::Sqlx(e) => WorkerError::Sqlx(e),
            GuardedError::LeaseLost(lost) => WorkerError::LeaseLost(lost),
        }
    }
}

/// The adapters a worker may call, with the contract version each was registered under.
#[derive(Clone, Default)]
pub struct Adapters {
    by_name: HashMap<String, (Arc<dyn Adapter>, i32)>,
}

/// Why [`Adapters::load_verified`] refused the registered adapters.
#[derive(Debug, thiserror::Error)]
pub enum AdapterRefused {
    /// The adapter registry could not be read.
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    /// At least one adapter's contract suite failed against its live destination.
    #[error("{}; refusing to start", failure_clauses(.reports))]
    ContractFailed {
        /// The failed suites, by adapter name.
        reports: Vec<SuiteReport>,
    },
}

fn failure_clauses(reports: &[SuiteReport]) -> String {
    reports
        .iter()
        .map(SuiteReport::failure_clause)
        .collect::<Vec<_>>()
        .join("; ")
}

impl Adapters {
    /// HTTP adapters for every registered adapter, each trusted only once its contract suite
    /// passed against its live destination (DESIGN.md § Adapter contract). The suites run
    /// concurrently and make real, labelled probe deliveries; one failure refuses them all.
    pub async fn load_verified(pool: &PgPool) -> Result<Self, AdapterRefused> {
        let adapters = Self::load(pool).await?;
        let suites: Vec<BoxFuture<'_, SuiteReport>> = adapters
            .by_name
            .iter()
            .map(|(name, (adapter, _))| {
                Box::pin(contract_suite::verify(name, adapter.as_ref())) as BoxFuture<'_, _>
            })
            .collect();
        let mut reports = contract_suite::join_all(suites).await;
        reports.sort_by(|a, b| a.adapter.cmp(&b.adapter));
        for report in &reports {
            if report.passed() {
                tracing::info!(adapter = %report.adapter, checks = report.checks.len(), "contract suite passed");
            } else {
                tracing::error!(adapter = %report.adapter, summary = %report.summary(), "contract suite failed");
            }
        }
        reports.retain(|r| !r.passed());
        if reports.is_empty() {
            Ok(adapters)
        } else {
            Err(AdapterRefused::ContractFailed { reports })
        }
    }

    /// HTTP adapters for every registered adapter, without running their contract suites: for
    /// tests and tools whose destinations were verified elsewhere.
    pub async fn load(pool: &PgPool) -> sqlx::Result<Self> {
        let mut adapters = Self::default();
        for row in adapter_store::all(pool).await? {
            adapters.insert(
                row.name,
                Arc::new(HttpAdapter::new(&row.base_url, row.contract)),
                row.contract_version,
            );
        }
        Ok(adapters)
    }

    /// Adds (or replaces) an adapter under `name`.
    pub fn insert(&mut self, name: String, adapter: Arc<dyn Adapter>, contract_version: i32) {
        self.by_name.insert(name, (adapter, contract_version));
    }

    fn get(&self, step: &Claimed) -> Result<(Arc<dyn Adapter>, i32), WorkerError> {
        let name = step.adapter.clone().unwrap_or_default();
        self.by_name
            .get(&name)
            .map(|(a, v)| (a.clone(), *v))
            .ok_or(WorkerError::UnknownAdapter {
                step: step.id,
                adapter: name,
            })
    }
}

/// What one step's pass ended in, for logs, tests and benchmarks.
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
    adapters: Arc<Adapters>,
}

impl Worker {
    /// A worker over `pool` calling `adapters`. Its lease holder name gets a random suffix, so
    /// two processes configured with one name can never pass for each other.
    pub fn new(pool: PgPool, mut config: WorkerConfig, adapters: Adapters) -> Self {
        config.name = format!(
            "{}#{}",
            config.name,
            &Uuid::new_v4().simple().to_string()[..8]
        );
        Self {
            pool,
            config: Arc::new(config),
            adapters: Arc::new(adapters),
        }
    }

    /// The lease holder name this worker writes.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// How long this worker's leases last without renewal.
    pub fn lease(&self) -> Duration {
        self.config.lease
    }

    fn lease_secs(&self) -> f64 {
        self.config.lease.as_secs_f64()
    }

    /// Runs until `shutdown` resolves: sweeps expired leases, claims, processes, and checks the
    /// semantic invariants every `invariant_interval`.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut next_check = tokio::time::Instant::now();
        loop {
            // Between passes, never during one: steps in flight finish their protocol first.
            tokio::select! {
                biased;
                () = &mut shutdown => return,
                () = std::future::ready(()) => {}
            }
            if tokio::time::Instant::now() >= next_check {
                self.check_invariants().await;
                next_check = tokio::time::Instant::now() + self.config.invariant_interval;
            }
            let worked = match self.run_once().await {
                Ok(reports) => !reports.is_empty(),
                Err(error) => {
                    tracing::warn!(%error, worker = %self.config.name, "worker pass failed; retrying");
                    false
                }
            };
            if !worked {
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(self.config.idle_poll) => {}
                }
            }
        }
    }

    async fn check_invariants(&self) {
        match crate::invariants::check(&self.pool).await {
            Ok(violations) => {
                for v in violations {
                    tracing::warn!(kind = %v.kind, subject = %v.subject, evidence = %v.evidence, "invariant violated");
                }
            }
            Err(error) => tracing::warn!(%error, "invariant check failed"),
        }
    }

    /// One pass: sweep, claim up to a batch, process the batch concurrently.
    pub async fn run_once(&self) -> Result<Vec<(Uuid, StepReport)>, WorkerError> {
        self.sweep().await?;
        let claimed = self.claim().await?;
        let mut set = JoinSet::new();
        let mut reports = Vec::with_capacity(claimed.len());
        for step in claimed {
            if set.len() >= self.config.concurrency
                && let Some(done) = set.join_next().await
            {
                reports.push(done.expect("a step task does not panic")?);
            }
            let worker = self.clone();
            set.spawn(async move {
                let id = step.id;
                worker.process(step).await.map(|r| (id, r))
            });
        }
        while let Some(done) = set.join_next().await {
            reports.push(done.expect("a step task does not panic")?);
        }
        Ok(reports)
    }

    /// Ends attempts whose worker vanished and sends their steps to retry or recovery.
    pub async fn sweep(&self) -> Result<(), WorkerError> {
        let mut tx = self.pool.begin().await?;
        step::reclaim_expired_before_call(&mut tx).await?;
        let unknown = step::reclaim_expired_during_call(&mut tx).await?;
        for (_, workflow_id) in &unknown {
            workflow::refresh_state(&mut tx, *workflow_id).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Checkpoint 1: lease a batch and record the attempts of fresh ones.
    async fn claim(&self) -> Result<Vec<Claimed>, WorkerError> {
        let mut tx = self.pool.begin().await?;
        let mut claimed = step::claim(
            &mut tx,
            &self.config.name,
            self.config.batch,
            self.lease_secs(),
        )
        .await?;
        // Fresh claims get their attempt now, in this transaction; it rides along with the step.
        for c in claimed.iter_mut().filter(|c| c.state == StepState::Running) {
            c.attempt = Some(Uuid::now_v7());
        }
        let fresh: Vec<&Claimed> = claimed.iter().filter(|c| c.attempt.is_some()).collect();
        if !fresh.is_empty() {
            let steps: Vec<Uuid> = fresh.iter().map(|c| c.id).collect();
            let attempts: Vec<Uuid> = fresh.iter().filter_map(|c| c.attempt).collect();
            let numbers: Vec<i32> = fresh.iter().map(|c| c.attempt_count).collect();
            // A first attempt needs no authorization; a later one may carry an operator's.
            let again: Vec<Uuid> = fresh
                .iter()
                .filter(|c| c.attempt_count > 1)
                .map(|c| c.id)
                .collect();
            let granted = if again.is_empty() {
                Vec::new()
            } else {
                step::consume_authorizations(&mut tx, &again).await?
            };
            let authorizations: Vec<Option<Uuid>> = steps
                .iter()
                .map(|s| granted.iter().find(|(g, _)| g == s).map(|(_, a)| *a))
                .collect();
            step::insert_attempts(
                &mut tx,
                &self.config.name,
                self.lease_secs(),
                &steps,
                &attempts,
                &numbers,
                &authorizations,
            )
            .await?;
        }
        // Only a workflow that had not started changes state when one of its steps is claimed.
        for workflow_id in claimed
            .iter()
            .filter(|c| c.workflow_pending)
            .map(|c| c.workflow_id)
            .collect::<std::collections::BTreeSet<_>>()
        {
            workflow::refresh_state(&mut tx, workflow_id).await?;
        }
        tx.commit().await?;
        Ok(claimed)
    }

    async fn process(&self, step: Claimed) -> Result<StepReport, WorkerError> {
        let result = match (step.kind, step.state) {
            (StepKind::Pure, _) => self.run_pure(&step).await,
            (_, StepState::OutcomeUnknown) => self.recover(&step).await,
            _ => {
                let attempt = match step.attempt {
                    Some(attempt) => attempt,
                    None => self.open_attempt(&step).await?,
                };
                self.invoke(&step, attempt).await
            }
        };
        match result {
            Err(WorkerError::LeaseLost(_)) => {
                tracing::warn!(step = %step.id, "lease lost; another worker owns the step now");
                Ok(StepReport::LeaseLost)
            }
            // A step this code cannot run (an adapter not registered here, an input its
            // definition refuses) waits for a person instead of looping.
            Err(error @ (WorkerError::UnknownAdapter { .. } | WorkerError::Definition { .. })) => {
                tracing::error!(step = %step.id, %error, "step cannot run here; sent to review");
                self.settle_alone(&step, Settle::Review).await?;
                Ok(StepReport::ToReview)
            }
            // One step's trouble must not abort the others in flight: this step keeps its lease
            // until it expires, and the sweeper hands it on by its checkpoint.
            Err(error) => {
                tracing::error!(step = %step.id, %error, "step pass stopped; the sweeper takes over when its lease expires");
                Ok(StepReport::Stopped {
                    error: error.to_string(),
                })
            }
            ok => ok,
        }
    }

    async fn open_attempt(&self, step: &Claimed) -> Result<Uuid, WorkerError> {
        Ok(sqlx::query_scalar!(
            r#"select id from attempt where step_id = $1 and ended_at is null order by number desc limit 1"#,
            step.id
        )
        .fetch_one(&self.pool)
        .await?)
    }

    async fn run_pure(&self, step: &Claimed) -> Result<StepReport, WorkerError> {
        let input = parse_input(step)?;
        let output = definition::render(&input);
        let attempt = match step.attempt {
            Some(attempt) => attempt,
            None => self.open_attempt(step).await?,
        };
        let mut tx = self.pool.begin().await?;
        step::end_pure_attempt(&mut tx, attempt).await?;
        step::complete_pure(&mut tx, step.id, &self.config.name, &output).await?;
        step::release_dependants(&mut tx, step.workflow_id).await?;
        workflow::announce(
            &mut tx,
            step.workflow_id,
            "step.succeeded",
            &json!({ "step": step.id, "logical": step.logical }),
        )
        .await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        Ok(StepReport::PureCompleted)
    }

    fn request_key(step: &Claimed) -> RequestKey {
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

    /// Checkpoints 2–6 for an attempt already recorded.
    async fn invoke(&self, step: &Claimed, attempt: Uuid) -> Result<StepReport, WorkerError> {
        let (adapter, contract_version) = self.adapters.get(step)?;
        let key = Self::request_key(step);
        let input = parse_input(step)?;

        // Checkpoints 2 and 3: authority, then the request identity, before any byte is sent.
        let mut tx = self.pool.begin().await?;
        let prepared = prepare(&mut tx, step, &key).await?;
        let adapter_name = step.adapter.as_deref().unwrap_or_default();
        if let Some(reason) =
            step::authority_check(&mut tx, step.id, attempt, adapter_name, &input.recipient).await?
        {
            let observation = TransportObservation::AuthorityDenied { reason };
            return self
                .conclude(tx, step, attempt, &key, adapter.as_ref(), observation)
                .await;
        }
        let bound = step::bind_request(
            &mut tx,
            &step::RequestIdentity {
                key: key.as_str(),
                step: step.id,
                digest: prepared.request_digest.as_str(),
                summary: &prepared.body,
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
            return self
                .conclude(tx, step, attempt, &key, adapter.as_ref(), observation)
                .await;
        }
        step::mark_invoking(&mut tx, step.id, &self.config.name, attempt, key.as_str()).await?;
        tx.commit().await?;
        crate::failpoint::hit("after_obligation_commit");

        // Checkpoint 4: the call, outside any transaction, with the lease renewed meanwhile.
        let call = match &step.withdraws {
            None => adapter.deliver(&key, &prepared),
            Some(target) => {
                let (adapter, key) = (&adapter, &key);
                Box::pin(async move {
                    match adapter.withdraw(key, target).await {
                        WithdrawalObservation::Withdrawn {
                            withdrawal_reference,
                            ..
                        } => TransportObservation::Accepted {
                            status: 201,
                            external_reference: withdrawal_reference,
                            replayed: false,
                        },
                        WithdrawalObservation::Transport(observation) => observation,
                    }
                })
            }
        };
        let observation = self.call_renewing(step.id, call).await;
        crate::failpoint::hit(if step.withdraws.is_some() {
            "during_compensation_acceptance"
        } else {
            "after_response_before_observation"
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
            step::record_observation(
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

    async fn call_renewing<T>(&self, step: Uuid, call: crate::adapter::BoxFuture<'_, T>) -> T {
        let mut call = call;
        let mut renew = tokio::time::interval(self.config.lease / 3);
        renew.tick().await;
        loop {
            tokio::select! {
                result = &mut call => return result,
                _ = renew.tick() => {
                    if let Err(error) = step::renew_lease(&self.pool, step, &self.config.name, self.lease_secs()).await {
                        tracing::warn!(%error, %step, "lease renewal failed during a call");
                    }
                }
            }
        }
    }

    /// Checkpoints 5 and 6: the observation, then the receipt or where the step goes next.
    async fn conclude(
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
        step::hold_lease(&mut tx, step.id, worker).await?;
        step::end_attempt(&mut tx, step.id, attempt, Some(key.as_str()), &observation).await?;
        let outcome = observation.outcome();
        let method = match &observation {
            TransportObservation::Accepted { replayed: true, .. } => Some("idempotent_replay"),
            TransportObservation::Accepted { .. } => Some("direct_response"),
            _ => None,
        };
        let contract = adapter.contract();
        let state = match &observation {
            TransportObservation::Accepted {
                external_reference,
                replayed,
                status,
            } => {
                let method = if *replayed {
                    "idempotent_replay"
                } else {
                    "direct_response"
                };
                let summary = json!({ "status": status, "replayed": replayed });
                self.record_reference(&mut tx, step, key, external_reference, method, &summary)
                    .await?
            }
            _ => {
                let settle = match outcome {
                    AttemptOutcome::OutcomeUnknown => self.after_unknown(step, contract, None),
                    AttemptOutcome::Rejected | AttemptOutcome::FailedBeforeEffect => {
                        let attempts = step.attempt_count.max(1);
                        if observation.may_retry(contract)
                            && attempts < self.config.retry.max_attempts
                        {
                            Settle::RetryAfter {
                                millis: self.config.retry.backoff_ms(attempts),
                            }
                        } else if outcome == AttemptOutcome::Rejected {
                            Settle::Rejected
                        } else {
                            Settle::Review
                        }
                    }
                    AttemptOutcome::Succeeded => {
                        unreachable!("only an accepted observation succeeds")
                    }
                };
                step::settle(&mut tx, step.id, Some(worker), settle).await?;
                settled_state(settle)
            }
        };
        workflow::announce(
            &mut tx,
            step.workflow_id,
            "step.attempt_ended",
            &json!({
                "step": step.id, "outcome": outcome, "state": state,
                "logical": step.logical, "adapter": step.adapter, "method": method,
            }),
        )
        .await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        crate::failpoint::hit("after_receipt_before_ack");
        Ok(StepReport::Settled { outcome, state })
    }

    /// Commits the receipt for an accepted reference (or opens a duplicate incident).
    async fn record_reference(
        &self,
        tx: &mut PgConnection,
        step: &Claimed,
        key: &RequestKey,
        external_reference: &str,
        method: &str,
        summary: &Value,
    ) -> Result<StepState, WorkerError> {
        // Found by a lookup after a restore older than the request identity: the regenerated
        // request the lookup compared is the one the receipt names.
        if method == "status_query" {
            let (_, contract_version) = self.adapters.get(step)?;
            bind_regenerated(tx, step, key, contract_version).await?;
        }
        let receipt = NewReceipt {
            step: step.id,
            request_key: key.as_str(),
            external_reference,
            completion_state: if step.withdraws.is_some() {
                "withdrawn"
            } else {
                "accepted"
            },
            method,
            result_summary: summary,
            author: None,
            evidence: None,
            reason: None,
        };
        match step::commit_receipt(tx, Some(&self.config.name), &receipt).await? {
            ReceiptOutcome::Committed { .. } => {
                step::release_dependants(tx, step.workflow_id).await?;
            }
            ReceiptOutcome::AlreadyRecorded | ReceiptOutcome::Duplicate { .. } => {
                step::release_lease(tx, step.id, &self.config.name).await?;
            }
        }
        Ok(StepState::Succeeded)
    }

    /// Whether automatic recovery of `step` has run out of its window.
    fn recovery_deadline_passed(&self, step: &Claimed) -> bool {
        step.unknown_since.is_some_and(|since| {
            chrono::Utc::now() - since
                > chrono::Duration::from_std(self.config.recovery_window)
                    .unwrap_or(chrono::Duration::MAX)
        })
    }

    /// Settles a step this worker holds, in a transaction of its own.
    async fn settle_alone(&self, step: &Claimed, settle: Settle) -> Result<(), WorkerError> {
        let mut tx = self.pool.begin().await?;
        step::settle(&mut tx, step.id, Some(&self.config.name), settle).await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        Ok(())
    }

    fn after_unknown(
        &self,
        step: &Claimed,
        contract: &crate::domain::SideEffectContract,
        last_lookup: Option<LookupAnswer>,
    ) -> Settle {
        if crate::failpoint::broken("resend_opaque") {
            return Settle::Unknown { recheck_millis: 0 };
        }
        let deadline_passed = self.recovery_deadline_passed(step);
        let facts = UnknownOutcomeFacts {
            last_lookup,
            recovery_deadline_passed: deadline_passed,
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
    async fn recover(&self, step: &Claimed) -> Result<StepReport, WorkerError> {
        let (adapter, contract_version) = self.adapters.get(step)?;
        let contract = adapter.contract().clone();
        let key = Self::request_key(step);
        // The contract (or the destination's URL) changed since the request was sent: what the
        // adapter can prove now says nothing about that request. A person decides.
        let sent_under =
            step::request_contract_version(&mut *self.pool.acquire().await?, key.as_str()).await?;
        if sent_under.is_some_and(|v| v != contract_version) {
            self.settle_alone(step, Settle::Review).await?;
            return Ok(StepReport::ToReview);
        }
        let deadline_passed = self.recovery_deadline_passed(step);
        let mut facts = UnknownOutcomeFacts {
            last_lookup: None,
            recovery_deadline_passed: deadline_passed,
        };
        loop {
            if crate::failpoint::broken("resend_opaque") {
                return self.resend(step).await;
            }
            match decide_after_unknown(&contract, &facts) {
                RecoveryDecision::ResendSameKey | RecoveryDecision::RetrySameReference => {
                    return self.resend(step).await;
                }
                RecoveryDecision::Query => {
                    let (answer, report) = self.query(step, adapter.as_ref(), &key).await?;
                    match answer {
                        Some(answer) => facts.last_lookup = Some(answer),
                        None => return Ok(report),
                    }
                }
                RecoveryDecision::AttachStatusQueryReceipt { external_reference } => {
                    return self.verified(step, &key, &external_reference).await;
                }
                RecoveryDecision::OpenDigestConflictIncident { external_reference } => {
                    return self.digest_conflict(step, &key, &external_reference).await;
                }
                decision @ (RecoveryDecision::QueryAgainAfter { .. }
                | RecoveryDecision::BackOffThenQuery
                | RecoveryDecision::Review { .. }) => {
                    let settle = match decision {
                        RecoveryDecision::Review { .. } => Settle::Review,
                        _ => self.after_unknown(step, &contract, facts.last_lookup.clone()),
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

    /// The lookup found the request under its digest: a `status_query` receipt settles the step.
    async fn verified(
        &self,
        step: &Claimed,
        key: &RequestKey,
        external_reference: &str,
    ) -> Result<StepReport, WorkerError> {
        let mut tx = self.pool.begin().await?;
        let summary = json!({ "lookup": "found" });
        let state = self
            .record_reference(
                &mut tx,
                step,
                key,
                external_reference,
                "status_query",
                &summary,
            )
            .await?;
        workflow::announce(
            &mut tx,
            step.workflow_id,
            "step.verified",
            &json!({
                "step": step.id, "external_reference": external_reference, "method": "status_query",
                "logical": step.logical, "adapter": step.adapter,
            }),
        )
        .await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        Ok(StepReport::Looked {
            answer: "found".into(),
            state,
        })
    }

    /// The lookup found the key under other bytes: an integrity incident, and a person decides.
    async fn digest_conflict(
        &self,
        step: &Claimed,
        key: &RequestKey,
        external_reference: &str,
    ) -> Result<StepReport, WorkerError> {
        let mut tx = self.pool.begin().await?;
        step::open_digest_conflict(
            &mut tx,
            step.id,
            external_reference,
            key.as_str(),
            &json!({ "lookup": "found_with_conflicting_digest" }),
        )
        .await?;
        step::settle(&mut tx, step.id, Some(&self.config.name), Settle::Review).await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        Ok(StepReport::ToReview)
    }

    /// An operator's *Check destination* on a step this worker leased for them: one lookup,
    /// acted on as the decision table says for what it found. Anything short of a found
    /// delivery leaves the step where it was, with the answer on its timeline; the next
    /// decision (check again, retry after authoritative absence) is the operator's.
    pub async fn check_destination(
        &self,
        step: &Claimed,
    ) -> Result<(Option<LookupAnswer>, StepReport), WorkerError> {
        let (adapter, _) = self.adapters.get(step)?;
        let key = Self::request_key(step);
        let (answer, report) = self.query(step, adapter.as_ref(), &key).await?;
        let settled = |found: &LookupAnswer| found.index_settles_in_ms(adapter.contract()) == 0;
        let report = match &answer {
            None => report,
            Some(
                found @ LookupAnswer::Found {
                    external_reference,
                    digest_matches: true,
                    ..
                },
            ) if settled(found) => self.verified(step, &key, external_reference).await?,
            Some(LookupAnswer::Found {
                external_reference,
                digest_matches: false,
                ..
            }) => self.digest_conflict(step, &key, external_reference).await?,
            Some(_) => {
                let mut conn = self.pool.acquire().await?;
                step::release_lease(&mut conn, step.id, &self.config.name).await?;
                StepReport::Looked {
                    answer: "inconclusive".into(),
                    state: step.state,
                }
            }
        };
        Ok((answer, report))
    }

    /// A status lookup, recorded as an observation; returns the answer for the decision table,
    /// or `None` when the lookup itself settled the step (several references: an incident).
    async fn query(
        &self,
        step: &Claimed,
        adapter: &dyn Adapter,
        key: &RequestKey,
    ) -> Result<(Option<LookupAnswer>, StepReport), WorkerError> {
        let mut conn = self.pool.acquire().await?;
        // Taken before the lookup leaves, so it can only understate how long the index had.
        let deadline_ms = i64::try_from(adapter.contract().deadline_ms).unwrap_or(i64::MAX);
        let (digest, summary, since_ms) =
            match step::request_identity(&mut conn, key.as_str()).await? {
                Some((digest, summary)) => {
                    let since = step::millis_since_last_call_ended(
                        &mut conn,
                        step.id,
                        key.as_str(),
                        deadline_ms,
                    )
                    .await?;
                    (digest, summary, since)
                }
                // Restored from a backup older than the request identity: regenerate the request,
                // and count the time since the step was found, less a deadline, as the index's.
                None => {
                    let prepared = prepare(&mut conn, step, key).await?;
                    let found = step
                        .unknown_since
                        .map_or(0, |at| (chrono::Utc::now() - at).num_milliseconds());
                    (
                        prepared.request_digest.to_string(),
                        prepared.body,
                        found - deadline_ms,
                    )
                }
            };
        let looked_after_sent_ms = u64::try_from(since_ms).unwrap_or(0);
        drop(conn);
        let bound_body_digest = summary["digest"].as_str().unwrap_or_default().to_owned();
        if bound_body_digest.is_empty() {
            return Err(
                sqlx::Error::Decode("the bound request has no content digest".into()).into(),
            );
        }
        let seen = self
            .call_renewing(step.id, adapter.lookup(key, &bound_body_digest))
            .await;
        crate::failpoint::hit("during_status_query");
        let mut tx = self.pool.begin().await?;
        step::renew_lease(&mut *tx, step.id, &self.config.name, self.lease_secs()).await?;
        let body = json!({ "seen": seen, "request_digest": digest, "looked_after_sent_ms": looked_after_sent_ms });
        step::record_observation(&mut tx, step.id, None, Some(key.as_str()), "lookup", &body)
            .await?;
        let answer = match seen {
            LookupObservation::Found {
                external_reference,
                all,
                ..
            } if all.len() > 1 => {
                let refs: Vec<(&str, Option<&str>)> = all
                    .iter()
                    .map(|r| (r.as_str(), Some(key.as_str())))
                    .collect();
                // The incident first: dependants stay blocked while it is open.
                step::open_duplicate_incident(&mut tx, step.id, &refs).await?;
                self.record_reference(
                    &mut tx,
                    step,
                    key,
                    &external_reference,
                    "status_query",
                    &json!({ "lookup": "found", "all": all }),
                )
                .await?;
                workflow::refresh_state(&mut tx, step.workflow_id).await?;
                tx.commit().await?;
                return Ok((
                    None,
                    StepReport::Looked {
                        answer: "found several".into(),
                        state: StepState::Succeeded,
                    },
                ));
            }
            LookupObservation::Found {
                external_reference,
                digest,
                ..
            } => LookupAnswer::Found {
                external_reference,
                digest_matches: digest == bound_body_digest,
                looked_after_sent_ms,
            },
            LookupObservation::FoundWithConflictingDigest {
                external_reference, ..
            } => LookupAnswer::Found {
                external_reference,
                digest_matches: false,
                looked_after_sent_ms,
            },
            LookupObservation::NotFound => LookupAnswer::NotFound {
                looked_after_sent_ms,
            },
            LookupObservation::Processing => LookupAnswer::Processing,
            LookupObservation::Unavailable { .. } | LookupObservation::NotSupported => {
                LookupAnswer::Unavailable
            }
        };
        tx.commit().await?;
        Ok((Some(answer), StepReport::ToReview))
    }

    /// A new attempt under the same key (idempotent replay, or after authoritative absence).
    async fn resend(&self, step: &Claimed) -> Result<StepReport, WorkerError> {
        let attempt = Uuid::now_v7();
        let mut tx = self.pool.begin().await?;
        step::begin_recovery_attempt(
            &mut tx,
            step.id,
            &self.config.name,
            attempt,
            self.lease_secs(),
            None,
        )
        .await?;
        tx.commit().await?;
        self.invoke(step, attempt).await
    }
}

/// Regenerates the request from the immutable inputs (recovery compares it with the bound one).
async fn prepare(
    conn: &mut PgConnection,
    step: &Claimed,
    key: &RequestKey,
) -> Result<PreparedRequest, WorkerError> {
    if let Some(target) = &step.withdraws {
        return Ok(definition::withdrawal_request(key.as_str(), target));
    }
    let input = parse_input(step)?;
    let deps = step::dependency_facts(conn, step.workflow_id).await?;
    // The harness's broken rule: recovery regenerates the request under the newest
    // definition instead of the one the workflow started with.
    let version = if step.state == StepState::OutcomeUnknown
        && crate::failpoint::broken("regenerate_with_newest")
    {
        definition::DOCUMENT_DELIVERY_VERSIONS[definition::DOCUMENT_DELIVERY_VERSIONS.len() - 1]
    } else {
        step.definition_version
    };
    definition::prepare_request(version, &step.logical, key.as_str(), &input, &deps).map_err(
        |source| WorkerError::Definition {
            step: step.id,
            source,
        },
    )
}

/// Binds the regenerated request to `key` where no identity was persisted: a step restored
/// from a backup taken before its call, now proven by a lookup or by an operator's evidence.
/// Regeneration is deterministic, so this is the request the live system sent.
pub async fn bind_regenerated(
    conn: &mut PgConnection,
    step: &Claimed,
    key: &RequestKey,
    contract_version: i32,
) -> Result<(), WorkerError> {
    if step::request_identity(conn, key.as_str()).await?.is_some() {
        return Ok(());
    }
    let prepared = prepare(conn, step, key).await?;
    step::bind_request(
        conn,
        &step::RequestIdentity {
            key: key.as_str(),
            step: step.id,
            digest: prepared.request_digest.as_str(),
            summary: &prepared.body,
            adapter: step.adapter.as_deref().unwrap_or_default(),
            contract_version,
        },
    )
    .await?;
    Ok(())
}

fn settled_state(settle: Settle) -> StepState {
    match settle {
        Settle::RetryAfter { .. } => StepState::Ready,
        Settle::Unknown { .. } => StepState::OutcomeUnknown,
        Settle::Review => StepState::ReviewRequired,
        Settle::Rejected => StepState::Rejected,
    }
}

fn parse_input(step: &Claimed) -> Result<DocumentDeliveryInput, WorkerError> {
    serde_json::from_value(step.workflow_input.clone()).map_err(|e| WorkerError::Definition {
        step: step.id,
        source: definition::InputError::Invalid(e.to_string()),
    })
}
