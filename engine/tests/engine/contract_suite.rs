//! Verification against real destination services (docs/DESIGN.md §5, the trust ladder): every
//! claim is proven on its failure path or it does not count. Honest files pass with what could
//! not be provoked left unverified; false claims are refuted with the evidence.

use crate::support::{adapter_claiming, spawn_destination};
use destinations::Kind;
use engine::adapter::contract_suite::{self, SuiteReport};
use engine::domain::{Claim, Operation, SideEffectContract, Trust};
use sqlx::PgPool;

/// The destinations' real visibility window in these tests.
const WINDOW_MS: u64 = 300;

/// What `kind` declares in `engine::contracts`, with the destinations' real window.
fn honest(kind: Kind) -> SideEffectContract {
    crate::support::declared(kind.as_str(), 2_000, WINDOW_MS, false)
}

/// Runs verification of the protocol file declaring `contract` against a fresh destination
/// of `kind`.
async fn suite(
    pool: &PgPool,
    kind: Kind,
    window_ms: u64,
    contract: SideEffectContract,
) -> SuiteReport {
    let destination = spawn_destination(pool, kind, window_ms).await;
    contract_suite::verify("docs", &adapter_claiming(&destination, contract)).await
}

/// The trust `claim` came to.
fn trust(report: &SuiteReport, claim: Claim) -> Trust {
    report.verdict(&claim).trust
}

/// The protocol files' rules: 1 reads `429`/`503` as failed before effect, 2 a 4xx refusal as
/// rejected (0 is the success).
fn rule(index: usize) -> Claim {
    Claim::Rule {
        operation: Operation::Deliver,
        index,
    }
}

#[sqlx::test(migrations = false)]
async fn an_honest_idempotent_adapter_is_verified_with_the_rule_no_lookup_can_prove_left_unverified(
    pool: PgPool,
) {
    let report = suite(&pool, Kind::Idempotent, WINDOW_MS, honest(Kind::Idempotent)).await;

    assert!(report.passed(), "{}", report.details());
    for claim in [
        Claim::Delivery,
        Claim::IdempotencyKey,
        Claim::Withdrawal,
        rule(2),
    ] {
        assert_eq!(
            trust(&report, claim.clone()),
            Trust::Verified,
            "{claim:?}: {}",
            report.details()
        );
    }
    // The replay was proven after lost answers too, not only on the happy path.
    let lost: Vec<&str> = report
        .checks_of(&Claim::IdempotencyKey)
        .map(|c| c.check)
        .filter(|c| c.starts_with("answer lost"))
        .collect();
    assert_eq!(lost.len(), 2, "{}", report.details());
    // `unavailable` was provoked and read as failed before effect, but with no lookup nothing
    // proves that nothing happened: the rule stays unverified.
    assert_eq!(
        trust(&report, rule(1)),
        Trust::Unverified,
        "{}",
        report.details()
    );
    assert!(
        report
            .verdict(&rule(1))
            .evidence
            .contains("without a lookup"),
        "{}",
        report.verdict(&rule(1)).evidence
    );
}

#[sqlx::test(migrations = false)]
async fn an_honest_queryable_adapter_proves_its_failed_before_effect_rule_by_a_lookup(
    pool: PgPool,
) {
    let report = suite(&pool, Kind::Queryable, WINDOW_MS, honest(Kind::Queryable)).await;

    assert!(report.passed(), "{}", report.details());
    for claim in [
        Claim::Delivery,
        Claim::Lookup,
        Claim::Withdrawal,
        rule(1),
        rule(2),
    ] {
        assert_eq!(
            trust(&report, claim.clone()),
            Trust::Verified,
            "{claim:?}: {}",
            report.details()
        );
    }
    let checks: Vec<&str> = report.checks_of(&Claim::Lookup).map(|c| c.check).collect();
    for provoked in [
        "answer lost (connection closed)",
        "answer lost (past the deadline)",
        "a key never sent",
        "another digest",
        "a declined attempt",
    ] {
        assert!(checks.contains(&provoked), "{provoked}: {checks:?}");
    }
}

#[sqlx::test(migrations = false)]
async fn an_honest_opaque_adapter_passes_with_nothing_but_its_delivery_and_rejections_proven(
    pool: PgPool,
) {
    let report = suite(&pool, Kind::Opaque, WINDOW_MS, honest(Kind::Opaque)).await;

    assert!(report.passed(), "{}", report.details());
    assert_eq!(trust(&report, rule(2)), Trust::Verified);
    assert_eq!(trust(&report, rule(1)), Trust::Unverified);
    assert!(
        report.summary().contains("deliver rule 2: unverified"),
        "{}",
        report.summary()
    );
}

#[sqlx::test(migrations = false)]
async fn an_honest_zero_window_claim_passes(pool: PgPool) {
    let contract = crate::support::declared("queryable", 2_000, 0, false);
    let report = suite(&pool, Kind::Queryable, 0, contract).await;
    assert!(report.passed(), "{}", report.details());
    assert_eq!(trust(&report, Claim::Lookup), Trust::Verified);
}

#[sqlx::test(migrations = false)]
async fn a_false_idempotency_claim_is_refuted_with_both_references_as_evidence(pool: PgPool) {
    let contract = SideEffectContract {
        accepts_idempotency_key: true,
        ..honest(Kind::Opaque)
    };
    let report = suite(&pool, Kind::Opaque, WINDOW_MS, contract).await;

    assert!(!report.passed());
    let verdict = report.verdict(&Claim::IdempotencyKey);
    assert_eq!(verdict.trust, Trust::Refuted, "{}", report.details());
    assert!(
        verdict.evidence.contains("the same key made"),
        "{}",
        verdict.evidence
    );
    let contradicted: Vec<&str> = report
        .checks_of(&Claim::IdempotencyKey)
        .filter(|c| c.verdict == contract_suite::Verdict::Contradicted)
        .map(|c| c.check)
        .collect();
    for check in [
        "replay",
        "concurrent sends",
        "same key, other digest",
        "answer lost (connection closed)",
        "answer lost (past the deadline)",
    ] {
        assert!(
            contradicted.contains(&check),
            "{check}: {}",
            report.details()
        );
    }
    assert!(
        report
            .refusal()
            .starts_with("adapter `docs`: idempotency key refuted"),
        "{}",
        report.refusal()
    );
    assert!(report.refusal().len() < 400, "{}", report.refusal());
}

#[sqlx::test(migrations = false)]
async fn a_false_lookup_claim_is_refuted(pool: PgPool) {
    let contract = SideEffectContract {
        query_by_client_reference: true,
        visibility_window_ms: WINDOW_MS,
        ..honest(Kind::Opaque)
    };
    let report = suite(&pool, Kind::Opaque, WINDOW_MS, contract).await;

    assert!(!report.passed());
    assert_eq!(
        trust(&report, Claim::Lookup),
        Trust::Refuted,
        "{}",
        report.details()
    );
    assert!(
        report
            .verdict(&Claim::Lookup)
            .evidence
            .contains("`unavailable`"),
        "{}",
        report.details()
    );
}

#[sqlx::test(migrations = false)]
async fn a_zero_window_claim_against_a_lagging_index_is_refuted(pool: PgPool) {
    let contract = crate::support::declared("queryable", 2_000, 0, false);
    let report = suite(&pool, Kind::Queryable, 1_000, contract).await;

    assert_eq!(
        trust(&report, Claim::Lookup),
        Trust::Refuted,
        "{}",
        report.details()
    );
    let contradicted: Vec<&str> = report
        .checks_of(&Claim::Lookup)
        .filter(|c| c.verdict == contract_suite::Verdict::Contradicted)
        .map(|c| c.check)
        .collect();
    assert!(
        contradicted.contains(&"after the window"),
        "{}",
        report.details()
    );
}

#[sqlx::test(migrations = false)]
async fn a_window_shorter_than_the_destinations_is_refuted(pool: PgPool) {
    let contract = crate::support::declared("queryable", 2_000, 100, false);
    let report = suite(&pool, Kind::Queryable, 1_500, contract).await;

    assert_eq!(trust(&report, Claim::Lookup), Trust::Refuted);
    assert!(
        report
            .verdict(&Claim::Lookup)
            .evidence
            .contains("lags longer than the declared 100 ms"),
        "{}",
        report.details()
    );
}

#[tokio::test]
async fn an_unreachable_sandbox_proves_nothing_and_refutes_nothing() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let adapter = engine::adapter::protocol::protocol_adapter(
        &format!("http://{closed}"),
        &honest(Kind::Idempotent),
    );
    let report = contract_suite::verify("docs", &adapter).await;

    assert!(!report.passed());
    for verdict in report.verdicts() {
        assert_eq!(verdict.trust, Trust::Unverified, "{verdict:?}");
    }
    assert!(
        report
            .verdict(&Claim::Delivery)
            .evidence
            .contains("could not reach the sandbox"),
        "{}",
        report.details()
    );
}

#[test]
fn a_rule_proven_only_by_a_lookup_that_is_not_verified_is_not_verified() {
    use engine::adapter::contract_suite::{ClaimCheck, Verdict};
    let rule = Claim::Rule {
        operation: Operation::Deliver,
        index: 1,
    };
    let report = |lookup: Verdict| {
        SuiteReport {
        adapter: "payments".into(),
        claims: vec![Claim::Delivery, Claim::Lookup, rule.clone()],
        checks: vec![
            ClaimCheck {
                claim: Claim::Lookup,
                check: "after the window",
                verdict: lookup,
                detail: "the index showed the effect after 3,000 ms, not 1,500".into(),
            },
            ClaimCheck {
                claim: rule.clone(),
                check: "nothing happened",
                verdict: Verdict::Held,
                detail: "after `declined` was read as failed before effect, a lookup answered `not_found`"
                    .into(),
            },
        ],
    }
    };
    assert_eq!(report(Verdict::Held).verdict(&rule).trust, Trust::Verified);
    for lookup in [Verdict::Contradicted, Verdict::Inconclusive] {
        let verdict = report(lookup).verdict(&rule);
        assert_eq!(verdict.trust, Trust::Unverified, "{lookup:?}");
        assert!(
            verdict.evidence.contains("3,000 ms"),
            "{}",
            verdict.evidence
        );
    }
}
