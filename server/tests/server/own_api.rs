//! A team's own definition and API, from files alone: the adapter file and the definition file
//! applied, the adapter verified against its destination, workflows started over the API and
//! recovered after lost answers — judged by what each destination's own ledger recorded.

use std::time::Duration;

use axum::http::StatusCode;
use destinations::{
    Config, Fault, FaultPlan, FaultRule, Kind, Match, Operation, RunningDestination, Secret,
};
use engine::adapter::apply::{self, Verified};
use engine::adapter::registry::Adapters;
use engine::domain::Role;
use engine::worker::{Worker, WorkerConfig};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::api::{call, token};

/// The repository's adapter file `file`, pointed at `base_url`, its secret (if any) read from
/// a file holding `secret`: what a team writes for its own staging environment.
pub(crate) fn adapter_file(
    file: &str,
    base_url: &str,
    secret: Option<(&str, &tempfile::TempDir)>,
) -> String {
    let path = format!("{}/../adapters/{file}", env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = source
        .lines()
        .map(|line| {
            if line.starts_with("base_url:") {
                format!("base_url: {base_url}")
            } else {
                line.to_owned()
            }
        })
        .collect();
    if let Some((value, dir)) = secret {
        crate::support::allow_temporary_secrets();
        let secret_path = dir.path().join("secret");
        std::fs::write(&secret_path, value).unwrap();
        let replaced = lines
            .iter()
            .map(|line| match (line.find("{ env: "), line.find('}')) {
                (Some(start), Some(_)) => {
                    let end = start + line[start..].find('}').unwrap() + 1;
                    format!(
                        "{}{{ file: {} }}{}",
                        &line[..start],
                        secret_path.display(),
                        &line[end..]
                    )
                }
                _ => line.clone(),
            });
        lines = replaced.collect();
    }
    lines.join("\n") + "\n"
}

/// The definition file `file` of this test binary's `files/`.
pub(crate) fn definition_file(file: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/server/files/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// Applies the adapter and definition files, verifies the adapter against its destination.
pub(crate) async fn apply_files(
    pool: &PgPool,
    adapter: &str,
    definition: &str,
    url: &str,
) -> String {
    let (name, _) = apply::apply(
        pool,
        adapter,
        engine::store::journal::Actor::Engine("test"),
        false,
    )
    .await
    .unwrap();
    match apply::verify(pool, &name, url).await.unwrap() {
        Verified::Passed { .. } => {}
        Verified::Failed { report, .. } => panic!("{}", report.summary()),
    }
    engine::definition::apply(
        pool,
        definition,
        engine::store::journal::Actor::Engine("test"),
        engine::definition::ApplyOptions::default(),
    )
    .await
    .unwrap();
    name
}

/// The answer to the next delivery is lost after the destination committed it.
pub(crate) fn lose_the_next_answer(destination: &RunningDestination) {
    destination
        .set_faults(FaultPlan::rules([FaultRule::new(
            Operation::Deliver,
            Match::Any,
            Fault::DropResponse {},
        )
        .times(1)]))
        .unwrap();
}

/// Starts `definition` under creation key `key` over the API, as a team's operator token.
pub(crate) async fn start(
    pool: &PgPool,
    definition: &str,
    key: &str,
    input: Value,
) -> (StatusCode, Value) {
    let token = token(pool, &format!("team-{key}"), Role::Operator, None).await;
    let body = json!({ "creation_key": key, "definition": definition, "input": input });
    call(
        pool,
        "POST",
        "/api/v1/workflows",
        Some(&token),
        Some(body.to_string()),
    )
    .await
}

/// Runs a worker (built from the stored adapter files) until the workflow settles.
pub(crate) async fn drive(pool: &PgPool, workflow: &str) -> String {
    let mut config = WorkerConfig::named("own-api");
    config.retry.base = Duration::from_millis(10);
    config.retry.cap = Duration::from_millis(50);
    let worker = Worker::new(pool.clone(), config, Adapters::load(pool).await.unwrap());
    let id = Uuid::parse_str(workflow).unwrap();
    for _ in 0..400 {
        let state: String = sqlx::query_scalar("select state::text from workflow where id = $1")
            .bind(id)
            .fetch_one(pool)
            .await
            .unwrap();
        if state == "completed" || state == "needs_review" {
            return state;
        }
        if worker.run_once().await.unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    panic!("workflow {workflow} did not settle");
}

async fn step_state(pool: &PgPool, workflow: &str) -> String {
    sqlx::query_scalar(
        "select state::text from step where workflow_id = $1::uuid order by created_at, id limit 1",
    )
    .bind(workflow)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn each_protocol_kind_runs_a_teams_own_definition_and_recovers_a_lost_answer_as_its_contract_allows(
    pool: PgPool,
) {
    for (kind, file, settles) in [
        (Kind::Idempotent, "idempotent-docs.yaml", "completed"),
        (Kind::Queryable, "queryable-docs.yaml", "completed"),
        (Kind::Opaque, "opaque-docs.yaml", "needs_review"),
    ] {
        let destination = destinations::spawn(
            destinations::database_beside(&pool).await.unwrap(),
            Config {
                visibility_window: Duration::from_millis(100),
                ..Config::new(kind)
            },
        )
        .await
        .unwrap();
        let url = destination.base_url();
        let adapter = adapter_file(file, &url, None)
            .replace("visibility_window_ms: 1500", "visibility_window_ms: 100");
        let name = apply_files(&pool, &adapter, &definition_file("notice.v1.yaml"), &url).await;
        lose_the_next_answer(&destination);

        let (status, started) = start(
            &pool,
            "notice",
            &format!("notice-{name}"),
            json!({ "adapter": name, "to": "ada", "text": "Your parcel is on its way" }),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED, "{started}");
        let workflow = started["id"].as_str().unwrap().to_owned();

        assert_eq!(drive(&pool, &workflow).await, settles, "{name}");
        let ledger = destination.ledger().await.unwrap();
        let real: Vec<_> = ledger
            .deliveries
            .iter()
            .filter(|d| d.recipient == "ada")
            .collect();
        assert_eq!(
            real.len(),
            1,
            "{name}: exactly one notice reached the destination"
        );
    }
}

/// A payments destination in the style of Stripe's, with its API key.
async fn payments(
    pool: &PgPool,
    config: Config,
) -> (RunningDestination, String, tempfile::TempDir) {
    let key = format!("sk_test_{}", Uuid::new_v4().simple());
    let destination = destinations::spawn(
        destinations::database_beside(pool).await.unwrap(),
        Config {
            api_key: Some(Secret::new(&key)),
            visibility_window: Duration::from_millis(100),
            ..config
        },
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = adapter_file("payments.yaml", &destination.base_url(), Some((&key, &dir)))
        .replace("visibility_window_ms: 1500", "visibility_window_ms: 100");
    (destination, file, dir)
}

/// A payments destination with the team's `charge` definition and the payments adapter applied
/// and verified against it.
async fn charging(pool: &PgPool) -> (RunningDestination, tempfile::TempDir) {
    let (destination, adapter, secret) = payments(pool, Config::payments()).await;
    let definition = definition_file("charge.v1.yaml");
    apply_files(pool, &adapter, &definition, &destination.base_url()).await;
    (destination, secret)
}

/// Starts a charge of `amount` for `order` over the API; returns the workflow's id.
async fn start_charge(pool: &PgPool, order: &str, customer: &str, amount: u32) -> String {
    let input = json!({ "order": order, "customer": customer, "amount": amount });
    let (status, started) = start(pool, "charge", &format!("order-{order}"), input).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    started["id"].as_str().unwrap().to_owned()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_lost_charge_answer_is_recovered_by_replaying_its_key_and_the_card_is_charged_once(
    pool: PgPool,
) {
    let (destination, _secret) = charging(&pool).await;
    lose_the_next_answer(&destination);

    let workflow = start_charge(&pool, "1001", "cus_ada", 1250).await;

    assert_eq!(drive(&pool, &workflow).await, "completed");
    let ledger = destination.ledger().await.unwrap();
    let charges: Vec<_> = ledger.charges_for("1001").collect();
    assert_eq!(charges.len(), 1, "one charge for the order: {charges:?}");
    let receipt: String = sqlx::query_scalar(
        "select r.method::text from receipt r join step s on s.id = r.step_id where s.workflow_id = $1::uuid",
    )
    .bind(&workflow)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(receipt, "idempotent_replay");
    // The adapter's rule read the charge's amount from the replayed answer: a typed receipt field.
    let amount: Value = sqlx::query_scalar(
        "select r.result_summary -> 'fields' -> 'amount' from receipt r
           join step s on s.id = r.step_id where s.workflow_id = $1::uuid",
    )
    .bind(&workflow)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(amount, json!(1250));
    // What verification proved is kept, claim by claim, for the step page.
    let claims = engine::store::adapter::claims(&pool, "payments")
        .await
        .unwrap();
    let key = claims
        .iter()
        .find(|c| c.claim == engine::domain::Claim::IdempotencyKey)
        .unwrap();
    assert_eq!(key.trust, engine::domain::Trust::Verified, "{claims:?}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_declined_card_ends_rejected_with_its_code_and_no_charge(pool: PgPool) {
    let (destination, _secret) = charging(&pool).await;

    let workflow = start_charge(&pool, "1002", "cus_declined", 990).await;

    assert_eq!(drive(&pool, &workflow).await, "needs_review");
    assert_eq!(step_state(&pool, &workflow).await, "rejected");
    let observation: Value = sqlx::query_scalar(
        "select a.observation from attempt a join step s on s.id = a.step_id where s.workflow_id = $1::uuid",
    )
    .bind(&workflow)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(observation["code"], "card_declined", "{observation}");
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(ledger.charges_for("1002").count(), 0);
    // Kept as a failed charge under the order's metadata, as Stripe keeps a decline.
    let declined: Vec<_> = ledger
        .declines
        .iter()
        .filter(|d| d.metadata.get("subject").map(String::as_str) == Some("1002"))
        .collect();
    assert_eq!(declined.len(), 1);
    assert!(declined[0].charge.starts_with("ch_"));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn past_the_providers_key_retention_a_lost_charge_goes_to_review_and_is_never_sent_again(
    pool: PgPool,
) {
    let (destination, _secret) = charging(&pool).await;
    lose_the_next_answer(&destination);
    let workflow = start_charge(&pool, "1003", "cus_ada", 4200).await;
    let worker = Worker::new(
        pool.clone(),
        WorkerConfig::named("first"),
        Adapters::load(&pool).await.unwrap(),
    );
    // The first call: committed at the destination, its answer lost.
    while step_state(&pool, &workflow).await != "outcome_unknown" {
        worker.run_once().await.unwrap();
    }
    // The request went out a day ago: the provider (24 h) may have forgotten its key.
    sqlx::query(
        "update external_request set first_sent_at = now() - interval '1 day' where step_id =
            (select id from step where workflow_id = $1::uuid)",
    )
    .bind(&workflow)
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("update step set run_after = now() where workflow_id = $1::uuid")
        .bind(&workflow)
        .execute(&pool)
        .await
        .unwrap();

    assert_eq!(drive(&pool, &workflow).await, "needs_review");
    assert_eq!(step_state(&pool, &workflow).await, "review_required");
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(
        ledger.charges_for("1003").count(),
        1,
        "never sent a second time"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_declared_idempotency_the_destination_does_not_honour_is_refused_by_verify_naming_the_claim(
    pool: PgPool,
) {
    let (destination, adapter, _secret) = payments(
        &pool,
        Config {
            honours_idempotency: false,
            ..Config::payments()
        },
    )
    .await;
    let (name, _) = apply::apply(
        &pool,
        &adapter,
        engine::store::journal::Actor::Engine("test"),
        false,
    )
    .await
    .unwrap();

    let verified = apply::verify(&pool, &name, &destination.base_url())
        .await
        .unwrap();

    let Verified::Failed { report, .. } = verified else {
        panic!("a dishonoured idempotency claim passed its suite");
    };
    assert!(
        report
            .summary()
            .contains("idempotency key: refuted — the same key made ch_"),
        "{}",
        report.summary()
    );
    let (may_send, key): (bool, bool) = sqlx::query_as(
        "select coalesce(verified_version = contract_version, false),
                (contract ->> 'accepts_idempotency_key')::bool
         from adapter where name = $1",
    )
    .bind(&name)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(!may_send, "a version that never passed sends nothing");
    assert!(
        !key,
        "a refuted key is not in the contract the engine acts on"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_signed_partner_event_whose_answer_is_lost_waits_for_a_person_and_is_posted_once(
    pool: PgPool,
) {
    let secret = format!("whsec_{}", Uuid::new_v4().simple());
    let destination = destinations::spawn(
        destinations::database_beside(&pool).await.unwrap(),
        Config::webhook(Secret::new(&secret)),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let adapter = adapter_file(
        "partner-webhook.yaml",
        &destination.base_url(),
        Some((&secret, &dir)),
    );
    apply_files(
        &pool,
        &adapter,
        &definition_file("partner_ping.v1.yaml"),
        &destination.base_url(),
    )
    .await;
    lose_the_next_answer(&destination);

    let (status, started) = start(
        &pool,
        "partner_ping",
        "ping-1",
        json!({ "partner": "acme", "event": "order.shipped" }),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let workflow = started["id"].as_str().unwrap().to_owned();

    assert_eq!(drive(&pool, &workflow).await, "needs_review");
    assert_eq!(step_state(&pool, &workflow).await, "review_required");
    let ledger = destination.ledger().await.unwrap();
    assert_eq!(
        ledger.events_for("order.shipped").count(),
        1,
        "posted once, signed"
    );
}
