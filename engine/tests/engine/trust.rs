//! The trust ladder end to end (docs/DESIGN.md §5): adapter files applied and verified against
//! the Stripe-style payments destination — honest, or promising less — and what the worker and
//! the decision table then do. Each test counts effects in the destination's own ledger.

use std::time::Duration;

use destinations::{Config, Fault, FaultPlan, FaultRule, Match, Operation, RunningDestination};
use engine::adapter::apply::{self, Verified};
use engine::adapter::registry::Adapters;
use engine::domain::{Claim, OperatorAction, StepState, Trust, permitted_actions};
use engine::intake::{NewWorkflow, start_workflow};
use engine::store::journal::Actor;
use engine::worker::Worker;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::support::worker_config;

pub(crate) const PAYMENTS: &str = include_str!("../../../adapters/payments.yaml");
const BASIC: &str = include_str!("../../../adapters/payments-basic.yaml");

/// One charge, through the adapter `payments`.
const CHARGE_ONLY: &str = r#"name: charge_only
version: 1
subject: "{{ input.customer }}"
input_schema:
  type: object
  additionalProperties: false
  required: [order, customer, amount]
  properties:
    order: { type: string }
    customer: { type: string }
    amount: { type: integer, minimum: 1 }
status_step: charge
steps:
  - name: charge
    external:
      adapter: payments
      request:
        amount: "{{ input.amount }}"
        currency: eur
        customer: "{{ input.customer }}"
        subject: "{{ input.order }}"
    words: { noun: Payment, service: the payment service }
"#;

/// A payments destination with its own database, configured by `config`.
pub(crate) async fn payments(z29c: &PgPool, config: Config) -> RunningDestination {
    destinations::spawn(
        destinations::database_beside(z29c).await.unwrap(),
        Config {
            visibility_window: Duration::from_millis(200),
            ..config
        },
    )
    .await
    .unwrap()
}

/// `source` named `payments`, calling `url`, its API key read from a variable set here (each
/// test runs in a process of its own).
pub(crate) fn file(source: &str, url: &str) -> String {
    // SAFETY: nextest runs every test in its own process; no other thread reads it meanwhile.
    unsafe { std::env::set_var("Z29C_PAYMENTS_API_KEY", "sk_test_trust") };
    let mut lines: Vec<String> = source.lines().map(str::to_owned).collect();
    for line in &mut lines {
        if line.starts_with("name: ") {
            *line = "name: payments".to_owned();
        } else if line.starts_with("base_url: ") {
            *line = format!("base_url: {url}");
        } else if line.starts_with("deadline_ms: ") {
            *line = "deadline_ms: 1000".to_owned();
        } else if line.trim_start().starts_with("visibility_window_ms: 1500") {
            *line = line.replace("1500", "200");
        }
    }
    lines.join("\n") + "\n"
}

/// Applies `source` as the adapter `payments`; verifies it against `sandbox` when given.
pub(crate) async fn applied(
    pool: &PgPool,
    source: &str,
    sandbox: Option<&str>,
) -> Option<Verified> {
    apply::apply(
        pool,
        source,
        engine::store::journal::Actor::Engine("test"),
        false,
    )
    .await
    .unwrap();
    engine::definition::apply(
        pool,
        CHARGE_ONLY,
        engine::store::journal::Actor::Engine("test"),
        engine::definition::ApplyOptions::default(),
    )
    .await
    .unwrap();
    match sandbox {
        Some(url) => Some(apply::verify(pool, "payments", url).await.unwrap()),
        None => None,
    }
}

pub(crate) fn worker(pool: &PgPool, adapters: Adapters) -> Worker {
    let mut config = worker_config("trust");
    config.recovery_window = Duration::from_secs(60);
    Worker::new(pool.clone(), config, adapters)
}

pub(crate) async fn start(pool: &PgPool, order: &str) -> Uuid {
    let started = start_workflow(
        pool,
        NewWorkflow {
            creation_key: order.to_owned(),
            definition: "charge_only".to_owned(),
            version: None,
            input: json!({ "order": order, "customer": "cus_ada", "amount": 1234 }),
        },
        Actor::Api("test"),
    )
    .await
    .unwrap();
    started.id()
}

async fn state(pool: &PgPool, workflow: Uuid) -> (StepState, i32) {
    sqlx::query_as(
        "select state, attempt_count from step where workflow_id = $1 and logical = 'charge'",
    )
    .bind(workflow)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Runs `worker` until the charge of `workflow` is in `wanted`, for at most 20 s.
pub(crate) async fn until(pool: &PgPool, worker: &Worker, workflow: Uuid, wanted: StepState) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (now, attempts) = state(pool, workflow).await;
        if now == wanted {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the charge never reached {wanted:?}: it is {now:?} after {attempts} attempts"
        );
        if worker.run_once().await.unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub(crate) async fn charges_for(destination: &RunningDestination, order: &str) -> Vec<String> {
    let ledger = destination.ledger().await.unwrap();
    ledger.charges_for(order).map(|c| c.id.clone()).collect()
}

/// The destination takes the next charge for `order`, and the answer never comes.
pub(crate) fn lose_answer_once(destination: &RunningDestination, order: &str) {
    destination
        .set_faults(FaultPlan::rules([FaultRule::new(
            Operation::Deliver,
            Match::ClientReference(order.into()),
            Fault::DropResponse {},
        )
        .times(1)]))
        .unwrap();
}

/// The charge step of `workflow` (its only step).
pub(crate) async fn charge_of(pool: &PgPool, workflow: Uuid) -> Uuid {
    sqlx::query_scalar("select id from step where workflow_id = $1")
        .bind(workflow)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// What the decision table offers for the charge of `workflow` now.
async fn offered(pool: &PgPool, workflow: Uuid) -> Vec<OperatorAction> {
    let step = charge_of(pool, workflow).await;
    let mut conn = pool.acquire().await.unwrap();
    let facts = engine::store::action::read_facts(&mut conn, step)
        .await
        .unwrap()
        .unwrap();
    permitted_actions(&facts.decision_facts().unwrap())
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_applied_version_sends_nothing_until_it_is_verified(pool: PgPool) {
    let destination = payments(&pool, Config::payments()).await;
    applied(&pool, &file(PAYMENTS, &destination.base_url()), None).await;
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let workflow = start(&pool, "order-held").await;

    until(&pool, &worker, workflow, StepState::Held).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    worker.run_once().await.unwrap();

    assert_eq!(state(&pool, workflow).await, (StepState::Held, 0));
    assert!(charges_for(&destination, "order-held").await.is_empty());
    let Some(Verified::Passed { .. }) = apply::verify(&pool, "payments", &destination.base_url())
        .await
        .ok()
    else {
        panic!("the honest file did not pass");
    };
    until(&pool, &worker, workflow, StepState::Succeeded).await;
    assert_eq!(charges_for(&destination, "order-held").await.len(), 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_version_pointed_elsewhere_sends_nothing_before_it_is_verified(pool: PgPool) {
    let first = payments(&pool, Config::payments()).await;
    let elsewhere = payments(&pool, Config::payments()).await;
    let verified = applied(
        &pool,
        &file(PAYMENTS, &first.base_url()),
        Some(&first.base_url()),
    )
    .await;
    assert!(
        matches!(verified, Some(Verified::Passed { .. })),
        "{verified:?}"
    );
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    // The same file, re-pointed: a new version, which has proven nothing.
    apply::apply(
        &pool,
        &file(PAYMENTS, &elsewhere.base_url()),
        engine::store::journal::Actor::Engine("test"),
        false,
    )
    .await
    .unwrap();
    let workflow = start(&pool, "order-repointed").await;

    until(&pool, &worker, workflow, StepState::Held).await;

    assert!(charges_for(&elsewhere, "order-repointed").await.is_empty());
    assert!(elsewhere.ledger().await.unwrap().charges.is_empty());
    assert!(charges_for(&first, "order-repointed").await.is_empty());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_workflow_started_right_after_apply_is_sent_not_reviewed(pool: PgPool) {
    let destination = payments(&pool, Config::payments()).await;
    // The worker loads its adapters before the file is applied, as a running fleet would.
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let url = destination.base_url();
    applied(&pool, &file(PAYMENTS, &url), Some(&url)).await;
    let workflow = start(&pool, "order-right-after").await;

    until(&pool, &worker, workflow, StepState::Succeeded).await;

    assert_eq!(state(&pool, workflow).await.1, 1);
    assert_eq!(
        charges_for(&destination, "order-right-after").await.len(),
        1
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_answer_only_an_unproven_rule_reads_as_failed_before_effect_is_an_unknown_outcome(
    pool: PgPool,
) {
    let destination = payments(&pool, Config::payments()).await;
    // One plausible line, never provoked: a gateway error read as "nothing happened".
    let source = file(PAYMENTS, &destination.base_url()).replace(
        "  outcomes:\n    - when: \"status == 200 and body.object == 'charge'\"",
        "  outcomes:\n    - when: \"status in [502, 503, 504]\"\n      failed_before_effect: { code: \"'bad_gateway'\" }\n    - when: \"status == 200 and body.object == 'charge'\"",
    );
    let verified = applied(&pool, &source, Some(&destination.base_url())).await;
    let Some(Verified::Passed { report, .. }) = verified else {
        panic!("{verified:?}");
    };
    let rule = Claim::Rule {
        operation: engine::domain::Operation::Deliver,
        index: 0,
    };
    assert_eq!(report.verdict(&rule).trust, Trust::Unverified);
    // The provider commits the charge, then answers 502.
    destination
        .set_faults(FaultPlan::rules([FaultRule::new(
            Operation::Deliver,
            Match::ClientReference("order-502".into()),
            Fault::ErrorAfterAccept { status: 502 },
        )
        .times(1)]))
        .unwrap();
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let workflow = start(&pool, "order-502").await;

    until(&pool, &worker, workflow, StepState::Succeeded).await;

    let outcomes: Vec<String> = sqlx::query_scalar(
        "select outcome::text from attempt a join step s on s.id = a.step_id
         where s.workflow_id = $1 order by a.number",
    )
    .bind(workflow)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(outcomes, ["outcome_unknown", "succeeded"]);
    assert_eq!(charges_for(&destination, "order-502").await.len(), 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_failed_before_effect_rule_the_sandbox_contradicts_is_refuted(pool: PgPool) {
    let destination = payments(&pool, Config::payments()).await;
    destination
        .set_faults(FaultPlan::rules([FaultRule::new(
            Operation::Deliver,
            Match::ClientReference("gateway-502".into()),
            Fault::ErrorAfterAccept { status: 502 },
        )]))
        .unwrap();
    let source = file(PAYMENTS, &destination.base_url())
        .replace(
            "  outcomes:\n    - when: \"status == 200 and body.object == 'charge'\"",
            "  outcomes:\n    - when: \"status in [502, 503, 504]\"\n      failed_before_effect: { code: \"'bad_gateway'\" }\n    - when: \"status == 200 and body.object == 'charge'\"",
        )
        .replace(
            "  provoke:\n",
            "  provoke:\n    - name: a gateway error\n      request: { amount: 100, currency: eur, customer: cus_contract_suite, subject: gateway-502 }\n      expect: { failed_before_effect: bad_gateway }\n",
        );

    let verified = applied(&pool, &source, Some(&destination.base_url())).await;

    let Some(Verified::Failed { report, .. }) = verified else {
        panic!("a contradicted rule passed: {verified:?}");
    };
    let rule = report.verdict(&Claim::Rule {
        operation: engine::domain::Operation::Deliver,
        index: 0,
    });
    assert_eq!(rule.trust, Trust::Refuted, "{}", report.details());
    assert!(
        rule.evidence.contains("but a lookup then found ch_"),
        "{}",
        rule.evidence
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_status_blind_lookup_is_refuted_when_a_declined_probe_is_found(pool: PgPool) {
    let destination = payments(&pool, Config::payments()).await;
    // The lookup as the shipped file once had it: any charge under the key counts.
    let source = file(PAYMENTS, &destination.base_url())
        .replace("and paid | length > 0", "and body.data | length > 0")
        .replace("(paid | last)", "(body.data | last)")
        .replace("all: \"paid | reverse", "all: \"body.data | reverse");

    let verified = applied(&pool, &source, Some(&destination.base_url())).await;

    let Some(Verified::Failed { report, .. }) = verified else {
        panic!("a status-blind lookup passed: {verified:?}");
    };
    let lookup = report.verdict(&Claim::Lookup);
    assert_eq!(lookup.trust, Trust::Refuted, "{}", report.details());
    assert!(
        lookup
            .evidence
            .contains("counts a declined attempt as found"),
        "{}",
        lookup.evidence
    );
    // The decline itself was read right, and the destination kept it as a failed charge.
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.declines.len(), 1);
    assert!(ledger.declines[0].charge.starts_with("ch_"));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_basic_file_is_verified_against_a_provider_that_ignores_keys_and_has_no_search(
    pool: PgPool,
) {
    let destination = payments(&pool, Config::basic_payments()).await;

    let verified = applied(
        &pool,
        &file(BASIC, &destination.base_url()),
        Some(&destination.base_url()),
    )
    .await;

    let Some(Verified::Passed { report, .. }) = verified else {
        panic!("{verified:?}");
    };
    assert_eq!(
        report.verdict(&Claim::Lookup).trust,
        Trust::Verified,
        "{}",
        report.details()
    );
    let walked = report
        .checks_of(&Claim::Lookup)
        .find(|c| c.check == "walks every page")
        .expect("a paged lookup walks its pages");
    assert_eq!(
        walked.verdict,
        engine::adapter::contract_suite::Verdict::Held,
        "{}",
        walked.detail
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_lost_answer_at_a_provider_without_keys_is_recovered_by_walking_its_list_once(
    pool: PgPool,
) {
    let destination = payments(&pool, Config::basic_payments()).await;
    let url = destination.base_url();
    applied(&pool, &file(BASIC, &url), Some(&url)).await;
    lose_answer_once(&destination, "order-lost");
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let workflow = start(&pool, "order-lost").await;

    until(&pool, &worker, workflow, StepState::Succeeded).await;

    let charged = charges_for(&destination, "order-lost").await;
    assert_eq!(charged.len(), 1);
    let (method, reference): (String, String) = sqlx::query_as(
        "select r.method::text, r.external_reference from receipt r join step s on s.id = r.step_id
         where s.workflow_id = $1",
    )
    .bind(workflow)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (method.as_str(), reference.as_str()),
        ("status_query", charged[0].as_str())
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_key_the_sandbox_refutes_leaves_no_same_key_retry_for_a_step_in_review(pool: PgPool) {
    let honest = payments(&pool, Config::payments()).await;
    let keyless = payments(&pool, Config::basic_payments()).await;
    let source = file(PAYMENTS, &honest.base_url()).replace(
        "unknown_outcome_policy: query",
        "unknown_outcome_policy: review",
    );
    applied(&pool, &source, Some(&honest.base_url())).await;
    lose_answer_once(&honest, "order-review");
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let workflow = start(&pool, "order-review").await;
    until(&pool, &worker, workflow, StepState::ReviewRequired).await;
    assert!(
        offered(&pool, workflow)
            .await
            .contains(&OperatorAction::RetrySameKey)
    );

    // Verified again against a sandbox that ignores the key: the claim is refuted.
    let again = apply::verify(&pool, "payments", &keyless.base_url())
        .await
        .unwrap();
    let Verified::Failed { report, .. } = again else {
        panic!("a key the sandbox ignores passed");
    };
    assert_eq!(report.verdict(&Claim::IdempotencyKey).trust, Trust::Refuted);

    let actions = offered(&pool, workflow).await;
    assert!(
        !actions.contains(&OperatorAction::RetrySameKey),
        "{actions:?}"
    );
    let claims = engine::store::adapter::claims(&pool, "payments")
        .await
        .unwrap();
    let key = claims
        .iter()
        .find(|c| c.claim == Claim::IdempotencyKey)
        .unwrap();
    assert_eq!(key.trust, Trust::Refuted);
    assert!(
        key.evidence.contains("the same key made ch_"),
        "{}",
        key.evidence
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_refused_connection_is_retried_by_the_adapters_budget_then_waits_unsent(pool: PgPool) {
    let sandbox = payments(&pool, Config::payments()).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    // Verified against its sandbox, calling a production host that refuses connections.
    let source = file(PAYMENTS, &format!("http://{closed}")).replace(
        "unknown_outcome_policy: query",
        "unknown_outcome_policy: query\nretry: { attempts: 3, backoff: 10ms, max_backoff: 20ms }",
    );
    applied(&pool, &source, Some(&sandbox.base_url())).await;
    let worker = worker(&pool, Adapters::load(&pool).await.unwrap());
    let workflow = start(&pool, "order-unreachable").await;

    until(&pool, &worker, workflow, StepState::Unsent).await;

    let outcomes: Vec<String> = sqlx::query_scalar(
        "select outcome::text from attempt a join step s on s.id = a.step_id
         where s.workflow_id = $1 order by a.number",
    )
    .bind(workflow)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(outcomes, ["failed_before_effect"; 3]);
    let status = engine::read::status::project(&pool, workflow)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        status.status,
        "Payment was not sent: the payment service could not take the request; review required"
    );
    assert_eq!(
        offered(&pool, workflow).await,
        [
            OperatorAction::RetrySameKey,
            OperatorAction::Replace,
            OperatorAction::Cancel
        ]
    );
}
