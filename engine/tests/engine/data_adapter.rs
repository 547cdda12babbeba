//! `DataAdapter` against small HTTP servers that record what they received: the exact bytes
//! sent, auth added only on the wire, and answers classified by the file's rules alone.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use engine::adapter::spec::{AdapterSpec, BaseUrl};
use engine::adapter::{Adapter, DataAdapter};
use engine::domain::{
    AttemptOutcome, ContractKind, InputDigest, LookupObservation, RequestKey, TransportObservation,
};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

const PAYMENTS: &str = include_str!("../../../adapters/payments.yaml");
const WEBHOOK: &str = include_str!("../../../adapters/partner-webhook.yaml");

/// What a test server received: path and query, headers, and the exact body bytes.
#[derive(Clone, Debug)]
struct Received {
    target: String,
    headers: HeaderMap,
    body: Bytes,
}

type Answerer = Arc<dyn Fn(&Received) -> (u16, Vec<(&'static str, String)>, String) + Send + Sync>;

/// A server answering every request with `answer(request)`; returns its URL and the log.
async fn server(answer: Answerer) -> (String, Arc<Mutex<Vec<Received>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let seen = seen.clone();
            let answer = answer.clone();
            async move {
                let received = Received {
                    target: uri.to_string(),
                    headers,
                    body,
                };
                let (status, extra, body) = answer(&received);
                seen.lock().unwrap().push(received);
                let mut response = (
                    StatusCode::from_u16(status).unwrap(),
                    [("content-type", "application/json")],
                    body,
                )
                    .into_response();
                for (name, value) in extra {
                    response.headers_mut().insert(name, value.parse().unwrap());
                }
                response
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, log)
}

fn answering(status: u16, body: Value) -> Answerer {
    Arc::new(move |_| (status, Vec::new(), body.to_string()))
}

/// Sets `name` for this test process. nextest runs every test in its own process, and each
/// test uses its own variable, so no other thread reads the environment meanwhile.
fn set_env(name: &str, value: &str) {
    // SAFETY: see above; no other thread of this process touches the environment.
    unsafe { std::env::set_var(name, value) };
}

fn built(source: &str, url: &str) -> DataAdapter {
    let mut spec = AdapterSpec::parse(source).unwrap();
    spec.base_url = BaseUrl::Literal(url.to_owned());
    DataAdapter::new(spec).unwrap()
}

fn digest() -> InputDigest {
    InputDigest::parse("sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
        .unwrap()
}

#[tokio::test]
async fn the_protocol_adapter_sends_the_same_body_bytes_as_the_http_adapter_did() {
    // The digest of the body `HttpAdapter::prepare` built (and reqwest's `.json` sent) for this
    // key, request and digest, computed from engine/src/adapter/http.rs before it was deleted
    // (commit d3df913): serde_json's compact, key-sorted
    // {"client_reference":"w-17/deliver-v1","digest":"sha256:9f86…0a08",
    //  "recipient":"ada@example.org","summary":"invoice 2026-11"}.
    const HTTP_ADAPTER_BODY: &str =
        "sha256:1829cfb13a30dcf2f6f9889b26095d62b6f87475874191abcc23ac3df015bdf0";
    let (url, log) = server(answering(
        201,
        json!({ "external_reference": "x-17", "replayed": false }),
    ))
    .await;
    for kind in ContractKind::ALL {
        let adapter = DataAdapter::new(engine::adapter::protocol::protocol_spec(
            kind, &url, 2_000, 0, false,
        ))
        .unwrap();
        let key = RequestKey::from("w-17/deliver-v1".to_owned());
        let request = json!({ "recipient": "ada@example.org", "summary": "invoice 2026-11" });
        let prepared = adapter.prepare(&key, &request, &digest()).unwrap();

        let seen = adapter.deliver(&key, &prepared).await;

        assert!(
            matches!(&seen, TransportObservation::Accepted { external_reference, .. } if external_reference == "x-17"),
            "{seen:?}"
        );
        let sent = log.lock().unwrap().pop().unwrap();
        assert_eq!(
            InputDigest::of_bytes(&sent.body).as_str(),
            HTTP_ADAPTER_BODY
        );
        assert_eq!(sent.target, "/deliveries");
        assert_eq!(
            sent.headers.get("idempotency-key").is_some(),
            kind == ContractKind::Idempotent
        );
        assert_eq!(prepared.summary["digest"], json!(digest()));
    }
}

#[tokio::test]
async fn a_bearer_secret_is_sent_but_kept_out_of_the_summary_and_every_observation() {
    const SECRET: &str = "sk_test_bearer_4f1b2b0b822cd15d";
    let variable = "Z29C_TEST_BEARER_A";
    set_env(variable, SECRET);
    let source = PAYMENTS.replace("Z29C_PAYMENTS_API_KEY", variable);
    let charge = json!({ "id": "ch_1", "object": "charge", "amount": 100, "currency": "eur" });
    let answers = Arc::new(Mutex::new(vec![
        (418, json!({ "teapot": true })),
        (200, charge),
    ]));
    let (url, log) = server(Arc::new(move |_| {
        let (status, body) = answers.lock().unwrap().pop().unwrap_or((503, json!({})));
        (status, Vec::new(), body.to_string())
    }))
    .await;
    let adapter = built(&source, &url);
    let key = RequestKey::from("w-1/pay-v1".to_owned());
    let request = json!({ "amount": 100, "currency": "eur", "subject": "w-1" });
    let prepared = adapter.prepare(&key, &request, &digest()).unwrap();

    let accepted = adapter.deliver(&key, &prepared).await;
    let unmatched = adapter.deliver(&key, &prepared).await;
    let lookup = adapter.lookup(&key, digest().as_str(), &Value::Null).await;
    let withdrawal = adapter.withdraw(&key, "ch_1").await;

    assert!(
        matches!(accepted, TransportObservation::Accepted { .. }),
        "{accepted:?}"
    );
    assert!(
        matches!(unmatched, TransportObservation::Unmatched { .. }),
        "{unmatched:?}"
    );
    let recorded = [
        serde_json::to_string(&prepared).unwrap(),
        serde_json::to_string(&accepted).unwrap(),
        serde_json::to_string(&unmatched).unwrap(),
        serde_json::to_string(&lookup).unwrap(),
        serde_json::to_string(&withdrawal).unwrap(),
        format!(
            "{adapter:?} {accepted} {unmatched:?}",
            accepted = accepted.describe()
        ),
    ];
    for text in recorded {
        assert!(!text.contains(SECRET), "the secret leaked into {text}");
    }
    let sent = log.lock().unwrap();
    assert_eq!(sent.len(), 4);
    for request in sent.iter() {
        assert_eq!(
            request.headers["authorization"],
            format!("Bearer {SECRET}").as_str()
        );
    }
}

#[tokio::test]
async fn an_hmac_signature_is_over_the_exact_bytes_sent_and_never_recorded() {
    const SECRET: &str = "whsec_test_9f86d081884c7d65";
    let variable = "Z29C_TEST_WEBHOOK_SECRET_B";
    set_env(variable, SECRET);
    let source = WEBHOOK.replace("Z29C_WEBHOOK_SECRET", variable);
    // The receiver checks the signature itself, over the raw bytes it read.
    let (url, log) = server(Arc::new(|received: &Received| {
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(&received.body);
        let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        if received.headers.get("x-signature").map(|v| v.as_bytes()) == Some(expected.as_bytes()) {
            (
                200,
                Vec::new(),
                json!({ "received": true, "id": "evt_1" }).to_string(),
            )
        } else {
            (
                401,
                Vec::new(),
                json!({ "error": "invalid signature" }).to_string(),
            )
        }
    }))
    .await;
    let adapter = built(&source, &url);
    let key = RequestKey::from("w-2/notify-v1".to_owned());
    let request = json!({ "channel": "orders", "subject": "w-2", "event": "Zoë paid ✓" });
    let prepared = adapter.prepare(&key, &request, &digest()).unwrap();

    let seen = adapter.deliver(&key, &prepared).await;

    assert!(
        matches!(&seen, TransportObservation::Accepted { external_reference, .. } if external_reference == "evt_1"),
        "{seen:?}"
    );
    let sent = log.lock().unwrap().pop().unwrap();
    assert_eq!(sent.target, "/webhooks/orders");
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["event"], "Zoë paid ✓");
    assert_eq!(body["z29c_digest"], json!(digest()));
    for text in [
        serde_json::to_string(&prepared).unwrap(),
        serde_json::to_string(&seen).unwrap(),
        format!("{adapter:?}"),
    ] {
        assert!(!text.contains(SECRET), "the secret leaked into {text}");
    }
}

#[tokio::test]
async fn an_answer_no_rule_recognizes_is_outcome_unknown_with_a_bounded_excerpt() {
    let long = "teapot ".repeat(2_000);
    let (url, _) = server(Arc::new(move |_| (418, Vec::new(), long.clone()))).await;
    set_env("Z29C_TEST_UNMATCHED_C", "s");
    let adapter = built(
        &WEBHOOK.replace("Z29C_WEBHOOK_SECRET", "Z29C_TEST_UNMATCHED_C"),
        &url,
    );
    let key = RequestKey::from("w-3/notify-v1".to_owned());
    let request = json!({ "channel": "orders", "subject": "w-3", "event": "e" });
    let prepared = adapter.prepare(&key, &request, &digest()).unwrap();

    let seen = adapter.deliver(&key, &prepared).await;

    assert_eq!(seen.outcome(), AttemptOutcome::OutcomeUnknown);
    assert!(!seen.may_retry(adapter.contract()));
    let TransportObservation::Unmatched { status, excerpt } = &seen else {
        panic!("expected an unmatched answer, saw {seen:?}");
    };
    assert_eq!(*status, 418);
    assert!(excerpt.starts_with("teapot teapot"), "{excerpt}");
    assert!(
        excerpt.chars().count() <= 301,
        "{} characters",
        excerpt.chars().count()
    );
    assert!(
        seen.describe().starts_with(
            "The destination answered 418, which no outcome rule of the adapter recognizes: teapot"
        ),
        "{}",
        seen.describe()
    );
}

#[tokio::test]
async fn a_payments_charge_decline_and_validation_error_are_read_from_the_rules() {
    let variable = "Z29C_TEST_BEARER_D";
    set_env(variable, "sk_test_d");
    let (url, log) = server(Arc::new(|received: &Received| {
        let form = String::from_utf8(received.body.to_vec()).unwrap();
        if form.contains("customer=cus_declined") {
            let decline = json!({ "error": { "type": "card_error", "code": "card_declined", "decline_code": "generic_decline" } });
            (402, Vec::new(), decline.to_string())
        } else if !form.contains("amount=") {
            let missing = json!({ "error": { "type": "invalid_request_error", "code": "parameter_missing", "param": "amount" } });
            (400, Vec::new(), missing.to_string())
        } else {
            let charge = json!({ "id": "ch_7", "object": "charge", "amount": 1234, "currency": "eur", "status": "succeeded" });
            (200, vec![("idempotent-replayed", "true".to_owned())], charge.to_string())
        }
    }))
    .await;
    let adapter = built(&PAYMENTS.replace("Z29C_PAYMENTS_API_KEY", variable), &url);
    let key = RequestKey::from("w-4/pay v1".to_owned());
    let deliver = |request: Value| {
        let adapter = &adapter;
        let key = &key;
        async move {
            let prepared = adapter.prepare(key, &request, &digest()).unwrap();
            adapter.deliver(key, &prepared).await
        }
    };

    let charged = deliver(
        json!({ "amount": 1234, "currency": "eur", "subject": "w-4", "customer": "cus_ada" }),
    )
    .await;
    let declined = deliver(
        json!({ "amount": 1234, "currency": "eur", "subject": "w-4", "customer": "cus_declined" }),
    )
    .await;
    let invalid = deliver(json!({ "amount": null, "currency": "eur", "subject": "w-4" })).await;

    let TransportObservation::Accepted {
        external_reference,
        replayed,
        fields,
        ..
    } = &charged
    else {
        panic!("expected a charge, saw {charged:?}");
    };
    assert_eq!(external_reference, "ch_7");
    assert!(*replayed);
    assert_eq!(fields["amount"], json!(1234));
    assert_eq!(fields["currency"], json!("eur"));
    assert_eq!(
        declined,
        TransportObservation::Rejected {
            status: 402,
            code: "card_declined".into()
        }
    );
    assert_eq!(declined.outcome(), AttemptOutcome::Rejected);
    assert_eq!(
        invalid,
        TransportObservation::NotAccepted {
            status: 400,
            code: "parameter_missing".into()
        }
    );
    let first = log.lock().unwrap()[0].clone();
    assert_eq!(first.target, "/v1/charges");
    assert_eq!(first.headers["idempotency-key"], "w-4/pay v1");
    assert_eq!(
        first.headers["content-type"],
        "application/x-www-form-urlencoded"
    );
    // Sorted by name; the absent description is left out; brackets and spaces encoded.
    assert_eq!(
        String::from_utf8(first.body.to_vec()).unwrap(),
        format!(
            "amount=1234&currency=eur&customer=cus_ada&metadata%5Bsubject%5D=w-4&metadata%5Bz29c_digest%5D={}&metadata%5Bz29c_key%5D=w-4%2Fpay+v1",
            digest().as_str().replace(':', "%3A")
        )
    );
}

#[tokio::test]
async fn a_payments_search_maps_to_found_conflicting_or_not_found_counting_only_succeeded_charges()
{
    let variable = "Z29C_TEST_BEARER_E";
    set_env(variable, "sk_test_e");
    let bound = digest();
    let other = InputDigest::of_bytes(b"other");
    let answers = Arc::new(Mutex::new(vec![
        json!({ "object": "search_result", "data": [] }),
        json!({ "object": "search_result", "data": [
            { "id": "ch_3", "object": "charge", "status": "failed", "metadata": { "z29c_digest": bound } },
            { "id": "ch_2", "object": "charge", "status": "succeeded", "metadata": { "z29c_digest": bound } },
            { "id": "ch_1", "object": "charge", "status": "succeeded", "metadata": { "z29c_digest": bound } },
        ] }),
        json!({ "object": "search_result", "data": [
            { "id": "ch_9", "object": "charge", "status": "succeeded", "metadata": { "z29c_digest": other } },
        ] }),
    ]));
    let (url, log) = server(Arc::new(move |_| {
        (
            200,
            Vec::new(),
            answers.lock().unwrap().pop().unwrap().to_string(),
        )
    }))
    .await;
    let adapter = built(&PAYMENTS.replace("Z29C_PAYMENTS_API_KEY", variable), &url);
    let key = RequestKey::from("w-5/pay-v1".to_owned());

    let conflicting = adapter.lookup(&key, bound.as_str(), &Value::Null).await;
    let found = adapter.lookup(&key, bound.as_str(), &Value::Null).await;
    let absent = adapter.lookup(&key, bound.as_str(), &Value::Null).await;

    assert_eq!(
        conflicting,
        LookupObservation::FoundWithConflictingDigest {
            external_reference: "ch_9".into(),
            digest: other.to_string()
        }
    );
    assert_eq!(
        found,
        LookupObservation::Found {
            external_reference: "ch_1".into(),
            digest: bound.to_string(),
            all: vec!["ch_1".into(), "ch_2".into()],
        }
    );
    assert_eq!(absent, LookupObservation::NotFound);
    let target = log.lock().unwrap()[0].target.clone();
    assert!(
        target.starts_with(
            "/v1/charges/search?query=metadata%5B%27z29c_key%27%5D%3A%27w-5%2Fpay-v1%27"
        ),
        "{target}"
    );
    let refund = adapter.prepare_withdrawal(&key, "ch_1").unwrap();
    assert_eq!(
        refund.summary["body"],
        json!({ "form": { "charge": "ch_1" } })
    );
}

#[tokio::test]
async fn a_declared_idempotency_the_destination_does_not_honour_is_refuted() {
    use engine::adapter::contract_suite;
    use engine::domain::{Claim, Trust};
    let variable = "Z29C_TEST_BEARER_F";
    set_env(variable, "sk_test_f");
    let made = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = made.clone();
    // A charges endpoint that ignores `Idempotency-Key`: every request is a new charge.
    let (url, log) = server(Arc::new(move |received: &Received| {
        if received.target.starts_with("/v1/charges/search") {
            let empty = json!({ "object": "search_result", "data": [] });
            return (200, Vec::new(), empty.to_string());
        }
        if received.target == "/v1/refunds" {
            let refund = json!({ "id": "re_1", "object": "refund" });
            return (200, Vec::new(), refund.to_string());
        }
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let charge = json!({ "id": format!("ch_{n}"), "object": "charge", "amount": 100, "currency": "eur" });
        (200, Vec::new(), charge.to_string())
    }))
    .await;
    let adapter = built(&PAYMENTS.replace("Z29C_PAYMENTS_API_KEY", variable), &url);

    let report = contract_suite::verify("payments", &adapter).await;

    assert!(!report.passed());
    assert_eq!(
        report.verdict(&Claim::IdempotencyKey).trust,
        Trust::Refuted,
        "{}",
        report.details()
    );
    assert!(
        report.summary().contains("idempotency key: refuted"),
        "{}",
        report.summary()
    );
    // The probe is the file's `verify.probe`, not the protocol's document.
    let first = log.lock().unwrap()[0].clone();
    let form = String::from_utf8(first.body.to_vec()).unwrap();
    assert!(
        form.starts_with("amount=100&currency=eur&customer=cus_contract_suite"),
        "{form}"
    );
}
