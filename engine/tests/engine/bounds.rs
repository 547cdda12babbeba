//! What no file or input can make the engine do: allocate without bound, reach another
//! resource than the file names, call an adapter the definition does not list, digest two
//! inputs alike, or record as unknown a request that never left.

use destinations::Kind;
use engine::adapter::Adapter;
use engine::adapter::spec::{AdapterSpec, BaseUrl};
use engine::domain::{AttemptOutcome, InputDigest, RequestKey, TransportObservation};
use engine::intake::{NewWorkflow, StartError, start_workflow};
use engine::store::journal::Actor;
use serde_json::json;
use sqlx::PgPool;

use crate::support::Harness;

/// A definition whose one request field repeats a character as often as the input says.
const REPEATS: &str = r#"
name: repeats
version: 1
subject: "{{ input.recipient }}"
input_schema:
  type: object
  additionalProperties: false
  required: [recipient, n]
  properties:
    recipient: { type: string, minLength: 1 }
    n: { type: integer, minimum: 0 }
steps:
  - name: deliver
    external:
      adapter: docs
      request:
        recipient: "{{ input.recipient }}"
        summary: "{{ 'x' * input.n }}"
    words: { noun: Delivery, service: the delivery service }
"#;

async fn start(
    pool: &PgPool,
    definition: &str,
    key: &str,
    input: serde_json::Value,
) -> Result<uuid::Uuid, StartError> {
    let new = NewWorkflow {
        creation_key: key.to_owned(),
        definition: definition.to_owned(),
        version: None,
        input,
    };
    Ok(start_workflow(pool, new, Actor::Api("test")).await?.id())
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_request_that_would_allocate_gigabytes_is_refused_while_the_worker_keeps_going(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 1_000, 0).await;
    engine::definition::apply(
        &h.pool,
        REPEATS,
        Actor::Engine("test"),
        engine::definition::ApplyOptions::default(),
    )
    .await
    .unwrap();
    let bomb = start(
        &h.pool,
        "repeats",
        "bomb",
        json!({ "recipient": "r-bomb", "n": 1_000_000_000 }),
    )
    .await
    .unwrap();
    let fine = h.start("fine").await;

    h.drive_until(bomb, "deliver", "unsent").await;
    h.drive_until(fine, "notify", "succeeded").await;
    assert_eq!(h.workflow_state(fine).await, "completed");
    let sent: Vec<_> = h
        .ledger()
        .await
        .deliveries
        .into_iter()
        .filter(|d| d.recipient == "r-bomb")
        .collect();
    assert!(sent.is_empty(), "nothing of the refused request was sent");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_integer_beyond_two_to_the_53_is_refused_at_intake_with_its_path(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 1_000, 0).await;
    engine::definition::apply(
        &h.pool,
        REPEATS,
        Actor::Engine("test"),
        engine::definition::ApplyOptions::default(),
    )
    .await
    .unwrap();
    let refused = start(
        &h.pool,
        "repeats",
        "huge",
        json!({ "recipient": "r-1", "n": 9_007_199_254_740_993_u64 }),
    )
    .await
    .unwrap_err();
    let sentence = refused.to_string();
    assert!(
        sentence.contains("`n` is an integer beyond ±2^53"),
        "{sentence}"
    );
    let stored: i64 = sqlx::query_scalar("select count(*) from workflow")
        .fetch_one(&h.pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_input_may_choose_only_an_adapter_its_definition_lists(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 1_000, 0).await;
    let started = start(
        &h.pool,
        "document_delivery",
        "elsewhere",
        json!({ "adapter": "partner-webhook", "recipient": "r-1", "document": { "title": "t", "body": "b" } }),
    )
    .await
    .unwrap_err();
    let sentence = started.to_string();
    assert!(
        sentence.contains("may call only") && sentence.contains("`partner-webhook`"),
        "{sentence}"
    );

    let unlisted = REPEATS.replace("adapter: docs", "adapter: \"{{ input.recipient }}\"");
    let refused = engine::definition::apply(
        &h.pool,
        &unlisted,
        Actor::Engine("test"),
        engine::definition::ApplyOptions {
            allow_missing_adapters: true,
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    let sentence = refused.to_string();
    assert!(
        sentence.contains("list the adapters it may choose"),
        "{sentence}"
    );
    assert!(sentence.starts_with("line 13"), "{sentence}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_token_limited_to_adapters_starts_no_workflow_that_calls_another(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 1_000, 0).await;
    let input =
        json!({ "adapter": "docs", "recipient": "r-1", "document": { "title": "t", "body": "b" } });
    let new = || NewWorkflow {
        creation_key: "limited".to_owned(),
        definition: "document_delivery".to_owned(),
        version: None,
        input: input.clone(),
    };
    let limit = ["letters-*".to_owned()];
    let refused =
        engine::intake::start_workflow_within(&h.pool, new(), Actor::Api("t"), Some(&limit))
            .await
            .unwrap_err();
    assert!(
        matches!(refused, StartError::AdapterNotAllowed { .. }),
        "{refused}"
    );
    let allowed = ["docs".to_owned()];
    engine::intake::start_workflow_within(&h.pool, new(), Actor::Api("t"), Some(&allowed))
        .await
        .unwrap();
}

fn webhook(url: &str) -> engine::adapter::DataAdapter {
    // SAFETY: nextest runs each test in its own process; nothing else reads the environment.
    unsafe { std::env::set_var("Z29C_WEBHOOK_SECRET", "whsec_bounds") };
    let mut spec =
        AdapterSpec::parse(include_str!("../../../adapters/partner-webhook.yaml")).unwrap();
    spec.base_url = BaseUrl::Literal(url.to_owned());
    engine::adapter::DataAdapter::new(spec).unwrap()
}

fn digest() -> InputDigest {
    InputDigest::of_json(&json!("bounds"))
}

#[tokio::test]
async fn a_dot_dot_segment_survives_urlencode_and_is_refused_before_anything_is_sent() {
    let adapter = webhook("http://127.0.0.1:9");
    let key = RequestKey::from("w/post-v1".to_owned());
    for channel in ["..", "."] {
        let request = json!({ "channel": channel, "event": "x" });
        let refused = adapter.prepare(&key, &request, &digest());
        let refused = refused.expect_err(channel);
        assert!(
            refused.0.contains("`..` segment"),
            "{channel}: {}",
            refused.0
        );
    }
    let fine = json!({ "channel": "a..b", "event": "x" });
    assert!(adapter.prepare(&key, &fine, &digest()).is_ok());
    // Encoded dots are encoded again, so they stay one harmless segment.
    let encoded = json!({ "channel": "%2E%2e", "event": "x" });
    let prepared = adapter.prepare(&key, &encoded, &digest()).unwrap();
    assert_eq!(prepared.summary["path"], "/webhooks/%252E%252e");
}

#[tokio::test]
async fn a_request_that_cannot_be_made_is_recorded_as_not_sent_never_as_unknown() {
    let file = include_str!("../../../adapters/opaque-docs.yaml").replace(
        "  json:\n    client_reference",
        "  headers:\n    X-Note: \"{{ request.summary }}\"\n  json:\n    client_reference",
    );
    let mut spec = AdapterSpec::parse(&file).unwrap();
    spec.base_url = BaseUrl::Literal("http://127.0.0.1:9".to_owned());
    let adapter = engine::adapter::DataAdapter::new(spec).unwrap();
    let key = RequestKey::from("w/deliver-v1".to_owned());
    let request = json!({ "recipient": "r-1", "summary": "line one\r\nInjected: yes" });
    let prepared = adapter.prepare(&key, &request, &digest()).unwrap();

    let seen = adapter.deliver(&key, &prepared).await;

    assert!(
        matches!(seen, TransportObservation::NotSent { .. }),
        "{seen:?}"
    );
    assert_eq!(seen.outcome(), AttemptOutcome::FailedBeforeEffect);
    assert!(
        seen.describe().starts_with("Not sent"),
        "{}",
        seen.describe()
    );
}
