//! Seeded fuzzing of every route the OpenAPI document lists: spoiled path parameters (NUL,
//! bytes that are not UTF-8, huge, ids of nothing), query strings (NUL in a filter, numbers out
//! of every range, unknown names), headers (`If-Match` of every shape) and bodies (random
//! bytes, JSON of the wrong shape, rows naming steps that do not exist). No case may answer
//! 5xx, every refusal is JSON with a sentence and a code, and none may write anything.

use axum::body::Body;
use engine::domain::Role;
use engine::domain::identity::percent_encode;
use engine::store::journal::Actor;
use engine::store::token::NewToken;
use http::{Request, header};
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use crate::fuzz::{Failures, Rng, SEED, send, step_under_review, written};
use crate::support::app;

/// Cases per route and method.
const CASES_PER_ROUTE: usize = 40;

/// A value for a path parameter.
fn path_value(rng: &mut Rng, step: Uuid) -> String {
    match rng.below(7) {
        0 => step.to_string(),
        1 => Uuid::now_v7().to_string(),
        2 => "%00".to_owned(),
        3 => "%FF%FE".to_owned(),
        4 => "x".repeat(1 + rng.below(3_000)),
        5 => "document_delivery".to_owned(),
        _ => percent_encode(&rng.text().chars().take(500).collect::<String>()),
    }
}

/// A query string: the console's filters and pages, each spoiled or absent.
fn query(rng: &mut Rng) -> String {
    const PARAMS: [(&str, &[&str]); 9] = [
        ("state", &["review_required", "%00", "nonsense", ""]),
        ("adapter", &["docs", "%00", "%FF", "a%00b"]),
        ("definition", &["document_delivery", "%00x"]),
        (
            "older_than_secs",
            &[
                "60",
                "-1",
                "99999999999999999",
                "9223372036854775807",
                "1e9",
                "x",
            ],
        ),
        ("limit", &["0", "-5", "501", "10", "99999999999"]),
        (
            "after",
            &["garbage", "2026-12-06T00:00:00Z|not-a-uuid", "%00"],
        ),
        ("dry_run", &["true", "maybe"]),
        ("allow_missing_adapters", &["true", "%00"]),
        ("before", &["-1", "99999999999999999999", "x"]),
    ];
    let mut picked = Vec::new();
    for (name, values) in PARAMS {
        if rng.chance(30) {
            picked.push(format!("{name}={}", rng.pick(values)));
        }
    }
    if picked.is_empty() {
        String::new()
    } else {
        format!("?{}", picked.join("&"))
    }
}

/// A body: one of the shapes the routes take, spoiled, or something else entirely.
fn body(rng: &mut Rng, step: Uuid) -> (Vec<u8>, Option<&'static str>) {
    let text = rng.text();
    let value = match rng.below(9) {
        0 => {
            let len = rng.below(400);
            return (rng.bytes(len), Some("application/json"));
        }
        1 => {
            json!({ "action": "retry_same_key", "reason": "fuzz", "rows": [{ "step": Uuid::now_v7(), "version": 1 }] })
        }
        2 => {
            json!({ "action": "waive", "reason": text, "residual_uncertainty": "\u{0}", "rows": [{ "step": step, "version": -1 }] })
        }
        3 => {
            json!({ "action": rng.pick(&["retry_same_key", "waive", "cancel", "x"]), "reason": text, "version": 9_007_199_254_740_993_u64 })
        }
        4 => json!({ "reason": text }),
        5 => json!({ "canonical": text, "disposition": "keep_both", "reason": "r" }),
        6 => {
            json!({ "creation_key": text, "definition": "document_delivery", "input": { "n": 1e308 } })
        }
        7 => Value::String(text),
        _ => json!([null, 1, { "rows": "not rows" }]),
    };
    let content_type = *rng.pick(&[
        Some("application/json"),
        Some("application/yaml"),
        Some("text/plain; charset=utf-8"),
        None,
    ]);
    (value.to_string().into_bytes(), content_type)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_api_route_answers_spoiled_requests_with_a_json_refusal_and_never_fails(
    pool: PgPool,
) {
    let step = step_under_review(&pool).await;
    let new = NewToken {
        name: "fuzz-routes",
        role: Role::Approver,
        creation_key_prefix: None,
        may_configure: true,
        adapters: None,
        on_behalf_of: None,
    };
    let token = engine::store::token::create(&pool, &new, Actor::Engine("fuzz"))
        .await
        .unwrap();
    let router = app(pool.clone());
    let document = serde_json::to_value(server::http::api::openapi_document()).unwrap();
    let before = written(&pool).await;
    let mut rng = Rng(SEED ^ 0x0005_EED0_F0A0_7E55);
    let mut failures = Failures::default();
    let mut cases = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        for method in ["get", "post", "put"] {
            if item.get(method).is_none() {
                continue;
            }
            for _ in 0..CASES_PER_ROUTE {
                cases += 1;
                let mut uri = String::new();
                for piece in path.split('/').skip(1) {
                    uri.push('/');
                    if piece.starts_with('{') {
                        uri.push_str(&path_value(&mut rng, step));
                    } else {
                        uri.push_str(piece);
                    }
                }
                uri.push_str(&query(&mut rng));
                let mut request = Request::builder()
                    .method(method.to_uppercase().as_str())
                    .uri(&uri)
                    .header(header::AUTHORIZATION, format!("Bearer {token}"));
                if rng.chance(30) {
                    let tag =
                        *rng.pick(&["W/\"1\"", "\"x\"", "*", "\"99999999999999999999\"", "1, 2"]);
                    request = request.header(header::IF_MATCH, tag);
                }
                let (bytes, content_type) = if method == "get" {
                    (Vec::new(), None)
                } else {
                    body(&mut rng, step)
                };
                if let Some(content_type) = content_type {
                    request = request.header(header::CONTENT_TYPE, content_type);
                }
                let answer = send(&router, request.body(Body::from(bytes)).unwrap()).await;
                let refusal = serde_json::from_str::<Value>(&answer.body).ok();
                let coded = refusal
                    .as_ref()
                    .filter(|r| r["code"].as_str().is_some_and(|c| !c.is_empty()))
                    .and_then(|r| r["error"].as_str().map(str::to_owned));
                failures.check(&format!("{} {path}", method.to_uppercase()), &answer, coded);
            }
        }
    }
    assert!(cases >= 500, "only {cases} cases");
    assert_eq!(written(&pool).await, before, "a refused request wrote rows");
    assert!(
        failures.0.is_empty(),
        "{} of {cases} cases answered 5xx or refused without a JSON sentence and code:\n{}",
        failures.0.values().sum::<usize>(),
        failures.report()
    );
}
