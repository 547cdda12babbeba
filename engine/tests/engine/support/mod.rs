//! Fixtures for engine tests: a real destination service with its own database, an adapter
//! registered for it, a worker, and a driver that runs passes until a condition holds.

use std::time::Duration;

use destinations::{
    Config, Fault, FaultPlan, FaultRule, Kind, Ledger, Match, Operation, RunningDestination,
};
use engine::adapter::registry::Adapters;
use engine::intake::{NewWorkflow, start_workflow};
use engine::outbox::consumer::Event;
use engine::store::journal::Actor;
use engine::store::outbox::Position;
use engine::worker::{StepReport, Worker, WorkerConfig};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

pub mod fixture;

/// A Z29C database, one destination of `kind` named `docs`, and a worker.
pub struct Harness {
    pub pool: PgPool,
    pub destination: RunningDestination,
    pub worker: Worker,
}

/// Worker settings that keep tests quick: short backoffs, a generous lease.
pub fn worker_config(name: &str) -> WorkerConfig {
    let mut config = WorkerConfig::named(name);
    config.retry.base = Duration::from_millis(10);
    config.retry.cap = Duration::from_millis(100);
    config.idle_poll = Duration::from_millis(10);
    config
}

/// The definitions shipped in the repository's `definitions/`, applied to `pool`.
pub async fn apply_shipped_definitions(pool: &PgPool) {
    for source in [
        include_str!("../../../../definitions/document_delivery.v1.yaml"),
        include_str!("../../../../definitions/document_delivery.v2.yaml"),
    ] {
        engine::definition::apply(
            pool,
            source,
            engine::store::journal::Actor::Engine("test"),
            engine::definition::ApplyOptions::default(),
        )
        .await
        .unwrap();
    }
}

impl Harness {
    /// Everything for `kind`, with the adapter's deadline and the destination's visibility window.
    pub async fn new(pool: PgPool, kind: Kind, deadline_ms: u64, window_ms: u64) -> Self {
        let destination = destinations::spawn(
            destinations::database_beside(&pool).await.unwrap(),
            Config {
                visibility_window: Duration::from_millis(window_ms),
                ..Config::new(kind)
            },
        )
        .await
        .unwrap();
        let contract = crate::support::declared(kind.as_str(), deadline_ms, window_ms, false);
        engine::adapter::apply::register_trusted(&pool, "docs", &destination.base_url(), &contract)
            .await
            .unwrap();
        apply_shipped_definitions(&pool).await;
        let adapters = Adapters::load(&pool).await.unwrap();
        let worker = Worker::new(pool.clone(), worker_config("worker-1"), adapters);
        Self {
            pool,
            destination,
            worker,
        }
    }

    /// A second worker on the same database and adapters.
    pub async fn another_worker(&self, name: &str) -> Worker {
        Worker::new(
            self.pool.clone(),
            worker_config(name),
            Adapters::load(&self.pool).await.unwrap(),
        )
    }

    /// Starts a document delivery through `docs`.
    pub async fn start(&self, key: &str) -> Uuid {
        let started = start_workflow(
            &self.pool,
            NewWorkflow {
                creation_key: key.to_owned(),
                definition: "document_delivery".to_owned(),
                version: None,
                input: json!({"adapter": "docs", "recipient": "r-1", "document": {"title": key, "body": "hello"}}),
            },
            Actor::Api("test"),
        )
        .await
        .unwrap();
        started.id()
    }

    /// The request key of `logical` in `workflow` (derived, so known before the call).
    pub fn key(workflow: Uuid, logical: &str) -> String {
        engine::domain::RequestKey::derive(workflow, &engine::domain::StepKey::new(logical, 2))
            .to_string()
    }

    pub fn faults(&self, plan: FaultPlan) {
        self.destination.set_faults(plan).unwrap();
    }

    pub async fn ledger(&self) -> Ledger {
        self.destination.ledger().await.unwrap()
    }

    /// Deliveries the destination itself recorded for `client_reference`.
    pub async fn effects(&self, client_reference: &str) -> usize {
        self.ledger()
            .await
            .deliveries
            .iter()
            .filter(|d| d.client_reference == client_reference)
            .count()
    }

    /// State and attempt count of a workflow's step.
    pub async fn step(&self, workflow: Uuid, logical: &str) -> (String, i32) {
        sqlx::query_as("select state::text, attempt_count from step where workflow_id = $1 and logical = $2 order by generation desc limit 1")
            .bind(workflow)
            .bind(logical)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// Outcomes of the step's attempts, in order.
    pub async fn outcomes(&self, workflow: Uuid, logical: &str) -> Vec<String> {
        sqlx::query_scalar(
            "select coalesce(a.outcome::text, 'open') from attempt a join step s on s.id = a.step_id
             where s.workflow_id = $1 and s.logical = $2 order by a.number",
        )
        .bind(workflow)
        .bind(logical)
        .fetch_all(&self.pool)
        .await
        .unwrap()
    }

    /// The receipt's method and external reference for a step, if it has one.
    pub async fn receipt(&self, workflow: Uuid, logical: &str) -> Option<(String, String)> {
        sqlx::query_as(
            "select r.method::text, r.external_reference from receipt r join step s on s.id = r.step_id
             where s.workflow_id = $1 and s.logical = $2",
        )
        .bind(workflow)
        .bind(logical)
        .fetch_optional(&self.pool)
        .await
        .unwrap()
    }

    pub async fn workflow_state(&self, workflow: Uuid) -> String {
        sqlx::query_scalar("select state::text from workflow where id = $1")
            .bind(workflow)
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// Runs worker passes until `logical` reaches `state`, failing after `limit`. Waiting is
    /// on real time only where the scenario is about real time (deadlines, visibility windows).
    pub async fn drive_until(&self, workflow: Uuid, logical: &str, state: &str) -> Vec<StepReport> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let mut reports = Vec::new();
        loop {
            if self.step(workflow, logical).await.0 == state {
                return reports;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{logical} never reached {state}: it is {:?}, attempts {:?}",
                self.step(workflow, logical).await,
                self.outcomes(workflow, logical).await
            );
            let pass = self.worker.run_once().await.unwrap();
            if pass.is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            reports.extend(pass.into_iter().map(|(_, r)| r));
        }
    }

    /// Runs worker passes for `period` of real time: for asserting that nothing more happens.
    pub async fn drive_for(&self, period: Duration) {
        let until = tokio::time::Instant::now() + period;
        while tokio::time::Instant::now() < until {
            if self.worker.run_once().await.unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// A destination of `kind` with its own database and a visibility window of `window_ms`.
pub async fn spawn_destination(z29c: &PgPool, kind: Kind, window_ms: u64) -> RunningDestination {
    destinations::spawn(
        destinations::database_beside(z29c).await.unwrap(),
        Config {
            visibility_window: Duration::from_millis(window_ms),
            ..Config::new(kind)
        },
    )
    .await
    .unwrap()
}

/// A protocol adapter for `destination` declaring `contract`, true or not.
pub fn adapter_claiming(
    destination: &RunningDestination,
    contract: engine::domain::SideEffectContract,
) -> engine::adapter::DataAdapter {
    engine::adapter::protocol::protocol_adapter(&destination.base_url(), &contract)
}

/// Delays the next delivery matching `matching` by `ms`.
pub fn delay_deliver(matching: Match, ms: u64) -> FaultPlan {
    FaultPlan::rules([
        FaultRule::new(Operation::Deliver, matching, Fault::DelayResponse { ms }).times(1),
    ])
}

/// `fault` on the next delivery only.
pub fn once(fault: Fault) -> FaultPlan {
    FaultPlan::rules([FaultRule::new(Operation::Deliver, Match::Any, fault).times(1)])
}

/// The contract a destination of `kind` declares (`idempotent`, `queryable` or `opaque`).
pub fn declared(
    kind: &str,
    deadline_ms: u64,
    window_ms: u64,
    review_unknown: bool,
) -> engine::domain::SideEffectContract {
    let kind = engine::domain::ContractKind::parse(kind).expect("a destination kind");
    engine::adapter::contracts::declared(kind, deadline_ms, window_ms, review_unknown)
}

/// `workflow`'s outbox events, in position order, as the publisher hands them on.
pub async fn events(pool: &PgPool, workflow: Uuid) -> Vec<Event> {
    type Row = (
        i64,
        i64,
        Uuid,
        Option<Uuid>,
        Option<i64>,
        String,
        serde_json::Value,
    );
    sqlx::query_as::<_, Row>(
        "select txid, id, event_id, workflow_id, revision, kind, payload from outbox
         where workflow_id = $1 order by txid, id",
    )
    .bind(workflow)
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .map(
        |(txid, id, event_id, workflow_id, revision, kind, payload)| Event {
            position: Position { txid, id },
            event_id,
            workflow_id,
            revision,
            kind,
            payload,
        },
    )
    .collect()
}
