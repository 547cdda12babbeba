//! The adapter contract suite against real destination services: honest contracts pass, and
//! false claims fail with a summary that names them. A worker refuses adapters that fail.

use crate::support::{adapter_claiming, spawn_destination};
use destinations::Kind;
use engine::adapter::contract_suite::{self, SuiteReport, claims};
use engine::adapter::registry::{AdapterRefused, Adapters};
use engine::domain::SideEffectContract;
use sqlx::PgPool;

/// The destinations' real visibility window in these tests.
const WINDOW_MS: u64 = 300;

/// What `kind` declares in `engine::contracts`, with the destinations' real window.
fn honest(kind: Kind) -> SideEffectContract {
    crate::support::declared(kind.as_str(), 2_000, WINDOW_MS, false)
}

/// Runs the suite for `contract` against a fresh destination of `kind`.
async fn suite(
    pool: &PgPool,
    kind: Kind,
    window_ms: u64,
    contract: SideEffectContract,
) -> SuiteReport {
    let destination = spawn_destination(pool, kind, window_ms).await;
    contract_suite::verify("docs", &adapter_claiming(&destination, contract)).await
}

fn failed_claims(report: &SuiteReport) -> Vec<&'static str> {
    report.failures().map(|c| c.claim).collect()
}

fn assert_passes(report: &SuiteReport, expected: &[&str]) {
    assert!(report.passed(), "{}", report.summary());
    let checked: Vec<&str> = report.checks.iter().map(|c| c.claim).collect();
    assert_eq!(checked, expected, "{report:#?}");
    assert!(
        report
            .summary()
            .starts_with("adapter `docs` honours every claim"),
        "{}",
        report.summary()
    );
}

#[sqlx::test(migrations = false)]
async fn an_honest_idempotent_claim_passes_its_suite(pool: PgPool) {
    let report = suite(&pool, Kind::Idempotent, WINDOW_MS, honest(Kind::Idempotent)).await;
    assert_passes(
        &report,
        &[
            claims::IDEMPOTENT_REPLAY,
            claims::IDEMPOTENT_UNDER_CONCURRENCY,
            claims::IDEMPOTENCY_CONFLICT_REFUSED,
            claims::NO_LOOKUP,
            claims::WITHDRAWAL,
            claims::WITHDRAWAL_REPLAY,
        ],
    );
}

#[sqlx::test(migrations = false)]
async fn an_honest_queryable_claim_passes_its_suite(pool: PgPool) {
    let report = suite(&pool, Kind::Queryable, WINDOW_MS, honest(Kind::Queryable)).await;
    assert_passes(
        &report,
        &[
            claims::LOOKUP_FINDS_DELIVERY,
            claims::LOOKUP_REPORTS_ABSENCE,
            claims::LOOKUP_REPORTS_CONFLICTING_DIGEST,
            claims::LOOKUP_INSIDE_WINDOW,
            claims::VISIBILITY_WINDOW,
            claims::WITHDRAWAL,
            claims::WITHDRAWAL_REPLAY,
        ],
    );
}

#[sqlx::test(migrations = false)]
async fn an_honest_opaque_claim_passes_its_suite(pool: PgPool) {
    let report = suite(&pool, Kind::Opaque, WINDOW_MS, honest(Kind::Opaque)).await;
    assert_passes(
        &report,
        &[
            claims::NO_LOOKUP,
            claims::WITHDRAWAL,
            claims::WITHDRAWAL_REPLAY,
        ],
    );
}

#[sqlx::test(migrations = false)]
async fn an_honest_zero_window_claim_passes_its_suite(pool: PgPool) {
    let contract = crate::support::declared("queryable", 2_000, 0, false);
    let report = suite(&pool, Kind::Queryable, 0, contract).await;
    assert!(report.passed(), "{}", report.summary());
}

#[sqlx::test(migrations = false)]
async fn a_false_idempotency_claim_fails_its_suite(pool: PgPool) {
    let contract = SideEffectContract {
        accepts_idempotency_key: true,
        ..honest(Kind::Opaque)
    };
    let report = suite(&pool, Kind::Opaque, WINDOW_MS, contract).await;

    assert_eq!(
        failed_claims(&report),
        vec![
            claims::IDEMPOTENT_REPLAY,
            claims::IDEMPOTENT_UNDER_CONCURRENCY,
            claims::IDEMPOTENCY_CONFLICT_REFUSED,
        ],
        "{report:#?}"
    );
    let summary = report.summary();
    assert!(
        summary.starts_with("adapter `docs` claims an idempotency key"),
        "{summary}"
    );
    assert!(summary.contains("instead of replaying"), "{summary}");
    assert!(summary.contains("made 8 deliveries"), "{summary}");
    assert!(
        summary.contains("the same key with another digest was accepted"),
        "{summary}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_false_lookup_claim_fails_its_suite(pool: PgPool) {
    let contract = SideEffectContract {
        query_by_client_reference: true,
        visibility_window_ms: WINDOW_MS,
        ..honest(Kind::Opaque)
    };
    let report = suite(&pool, Kind::Opaque, WINDOW_MS, contract).await;

    assert_eq!(
        failed_claims(&report),
        vec![
            claims::LOOKUP_FINDS_DELIVERY,
            claims::LOOKUP_REPORTS_ABSENCE,
            claims::LOOKUP_REPORTS_CONFLICTING_DIGEST,
            claims::LOOKUP_INSIDE_WINDOW,
            claims::VISIBILITY_WINDOW,
        ],
        "{report:#?}"
    );
    let summary = report.summary();
    assert!(
        summary.starts_with("adapter `docs` claims a status lookup"),
        "{summary}"
    );
    assert!(summary.contains("was still not found"), "{summary}");
    assert!(summary.contains("`unavailable`"), "{summary}");
}

#[sqlx::test(migrations = false)]
async fn a_zero_window_claim_against_a_lagging_index_fails_its_suite(pool: PgPool) {
    let contract = crate::support::declared("queryable", 2_000, 0, false);
    let report = suite(&pool, Kind::Queryable, 1_000, contract).await;

    assert_eq!(
        failed_claims(&report),
        vec![claims::VISIBILITY_WINDOW],
        "{report:#?}"
    );
    let summary = report.summary();
    assert!(
        summary.starts_with("adapter `docs` claims a visibility window"),
        "{summary}"
    );
    assert!(
        summary.contains("absence inside a zero window"),
        "{summary}"
    );
}

#[sqlx::test(migrations = false)]
async fn a_window_shorter_than_the_destinations_fails_its_suite(pool: PgPool) {
    let contract = crate::support::declared("queryable", 2_000, 100, false);
    let report = suite(&pool, Kind::Queryable, 1_500, contract).await;

    assert_eq!(
        failed_claims(&report),
        vec![claims::VISIBILITY_WINDOW],
        "{report:#?}"
    );
    assert!(
        report
            .summary()
            .contains("lags longer than the declared 100 ms"),
        "{}",
        report.summary()
    );
}

#[tokio::test]
async fn an_unreachable_destination_fails_every_claim_it_must_answer_without_panicking() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let adapter = engine::adapter::protocol::protocol_adapter(
        &format!("http://{closed}"),
        &honest(Kind::Idempotent),
    );
    let report = contract_suite::verify("docs", &adapter).await;

    assert_eq!(
        failed_claims(&report),
        vec![
            claims::IDEMPOTENT_REPLAY,
            claims::IDEMPOTENT_UNDER_CONCURRENCY,
            claims::IDEMPOTENCY_CONFLICT_REFUSED,
            claims::WITHDRAWAL,
            claims::WITHDRAWAL_REPLAY,
        ],
        "{report:#?}"
    );
    assert!(
        report
            .failures()
            .all(|c| c.detail.contains("could not connect")),
        "{report:#?}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_worker_loads_adapters_whose_suites_pass(pool: PgPool) {
    let destination = spawn_destination(&pool, Kind::Queryable, WINDOW_MS).await;
    engine::store::adapter::upsert(
        &pool,
        "docs",
        &destination.base_url(),
        &honest(Kind::Queryable),
    )
    .await
    .unwrap();
    let loaded = Adapters::load_verified(&pool).await;
    assert!(loaded.is_ok(), "{:?}", loaded.err());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_worker_refuses_an_adapter_whose_suite_fails_and_names_its_false_claims(pool: PgPool) {
    let honest_one = spawn_destination(&pool, Kind::Idempotent, WINDOW_MS).await;
    let opaque = spawn_destination(&pool, Kind::Opaque, WINDOW_MS).await;
    engine::store::adapter::upsert(
        &pool,
        "mail",
        &honest_one.base_url(),
        &honest(Kind::Idempotent),
    )
    .await
    .unwrap();
    let false_claim = SideEffectContract {
        accepts_idempotency_key: true,
        ..honest(Kind::Opaque)
    };
    engine::store::adapter::upsert(&pool, "docs", &opaque.base_url(), &false_claim)
        .await
        .unwrap();

    let refused = Adapters::load_verified(&pool).await.err().unwrap();

    let AdapterRefused::ContractFailed { reports } = &refused else {
        panic!("refused for another reason: {refused}");
    };
    assert_eq!(
        reports
            .iter()
            .map(|r| r.adapter.as_str())
            .collect::<Vec<_>>(),
        vec!["docs"]
    );
    let message = refused.to_string();
    assert!(
        message.starts_with("adapter `docs` claims an idempotency key"),
        "{message}"
    );
    assert!(message.ends_with("; refusing to start"), "{message}");
    assert!(!message.contains("`mail`"), "{message}");
}
