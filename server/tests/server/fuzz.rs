//! Seeded fuzzing of every API route and every server function: malformed and random bodies
//! (random bytes, truncated JSON, wrong types, huge strings, NUL bytes, wrong content types,
//! missing fields) must never answer 5xx, every 4xx must say in a sentence what is wrong, and
//! none of them may write anything. The seed is fixed, so a failure replays exactly.

use std::collections::BTreeMap;

use axum::body::Body;
use engine::domain::Role;
use engine::domain::identity::percent_encode;
use engine::store::journal::Actor;
use engine::store::token::NewToken;
use http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};
use sqlx::PgPool;
use tower::ServiceExt;
use uuid::Uuid;

use crate::support::{app, fixture};

/// Cases per route family; together well over the 1,000 the issue asks for.
const API_CASES: usize = 500;
const SERVER_FN_CASES: usize = 1_000;
pub(crate) const SEED: u64 = 0x2916_5EC0_F022_D00D;

/// xorshift64*: small, seeded, good enough to pick cases.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// A string mixing the characters that trip parsers and databases.
    pub(crate) fn text(&mut self) -> String {
        const PIECES: [&str; 16] = [
            "a", "Z", "7", " ", "\u{0}", "é", "𝄞", "\u{202e}", "%", "&", "=", "+", "\"", "'", "\n",
            "<script>",
        ];
        match self.below(10) {
            0 => String::new(),
            1 => "x".repeat(300 * 1024),
            2 => "\u{0}".repeat(1 + self.below(5)),
            _ => (0..self.below(40)).map(|_| *self.pick(&PIECES)).collect(),
        }
    }
}

/// What one case sent and got, for the failure report.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: String,
}

/// Sends `request`; a handler that panics (the real server then drops the connection) answers
/// here as a 500 naming the panic.
pub(crate) async fn send(router: &axum::Router, request: Request<Body>) -> Answer {
    let response = match tokio::spawn(router.clone().oneshot(request)).await {
        Ok(response) => response.unwrap(),
        Err(panicked) => {
            let reason = panicked.into_panic();
            let reason = reason
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| reason.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            return Answer {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                body: format!("the handler panicked: {reason}"),
            };
        }
    };
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// A sentence a person can read: some words, some letters.
pub(crate) fn is_sentence(text: &str) -> bool {
    text.split_whitespace().count() >= 2 && text.chars().any(char::is_alphabetic)
}

/// The start of `body` with quoted names and numbers blanked, so failures of one kind group.
fn shape(body: &str) -> String {
    let mut out = String::new();
    let mut quoted = None;
    for c in body.chars().take(160) {
        match quoted {
            Some(end) if c == end => {
                quoted = None;
                out.push('…');
                out.push(c);
            }
            Some(_) => {}
            None if c == '`' || (c == '\\') => {
                quoted = Some(if c == '`' { '`' } else { '\\' });
                out.push(c);
            }
            None if c.is_ascii_digit() => {
                if !out.ends_with('N') {
                    out.push('N');
                }
            }
            None => out.push(c),
        }
    }
    out
}

/// Failures grouped by route, status and the shape of the body.
#[derive(Default)]
pub(crate) struct Failures(pub(crate) BTreeMap<(String, u16, String), usize>);

impl Failures {
    pub(crate) fn check(&mut self, route: &str, answer: &Answer, sentence: Option<String>) {
        let bad = answer.status.is_server_error()
            || (answer.status.is_client_error() && !sentence.as_deref().is_some_and(is_sentence));
        if bad {
            let start = shape(&answer.body);
            *self
                .0
                .entry((route.to_owned(), answer.status.as_u16(), start))
                .or_default() += 1;
        }
    }

    pub(crate) fn report(&self) -> String {
        self.0
            .iter()
            .map(|((route, status, body), n)| format!("{n:>4} × {status} {route}: {body}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Rows in every table a request could write, besides sessions and sign-in records.
pub(crate) async fn written(pool: &PgPool) -> Vec<(&'static str, i64)> {
    let mut counts = Vec::new();
    for (table, query) in [
        ("workflow", "select count(*) from workflow"),
        ("step", "select count(*) from step"),
        ("attempt", "select count(*) from attempt"),
        ("observation", "select count(*) from observation"),
        ("receipt", "select count(*) from receipt"),
        ("waiver", "select count(*) from waiver"),
        (
            "operator_authorization",
            "select count(*) from operator_authorization",
        ),
        (
            "integrity_incident",
            "select count(*) from integrity_incident",
        ),
        ("bulk_run", "select count(*) from bulk_run"),
        ("bulk_item", "select count(*) from bulk_item"),
        ("outbox", "select count(*) from outbox"),
        ("api_token", "select count(*) from api_token"),
        ("definition", "select count(*) from definition"),
        ("adapter_version", "select count(*) from adapter_version"),
        (
            "audit",
            "select count(*) from audit where action not like 'sign%'",
        ),
    ] {
        let n: i64 = sqlx::query_scalar(query).fetch_one(pool).await.unwrap();
        counts.push((table, n));
    }
    counts
}

/// A valid start body, before the fuzzer spoils it.
fn valid_start() -> Value {
    json!({
        "creation_key": "fuzz-1",
        "definition": "document_delivery",
        "input": {"adapter": "letters", "recipient": "r-1", "document": {"title": "T", "body": "b"}}
    })
}

/// A body for `POST /api/v1/workflows` that must be refused, and its content type.
fn spoiled_start(rng: &mut Rng) -> (Vec<u8>, Option<&'static str>) {
    let json = Some("application/json");
    let valid = valid_start();
    let wrong_values = [
        json!(1),
        json!(-1.5),
        json!(true),
        json!(null),
        json!([]),
        json!({}),
    ];
    let fields = ["creation_key", "definition", "input", "version"];
    match rng.below(9) {
        0 => {
            let len = rng.below(2_000);
            (rng.bytes(len), json)
        }
        1 => {
            let text = valid.to_string();
            let cut = rng.below(text.len());
            (text.as_bytes()[..cut].to_vec(), json)
        }
        2 => {
            let mut body = valid;
            let value = rng.pick(&wrong_values).clone();
            let field = *rng.pick(&fields);
            // `version` takes a number: give it a string instead.
            body[field] = if field == "version" {
                json!("2")
            } else {
                value
            };
            if field == "input" && body[field].is_object() {
                body[field] = json!("not an object");
            }
            (body.to_string().into_bytes(), json)
        }
        3 => {
            let mut body = valid;
            let field = *rng.pick(&["creation_key", "definition", "input"]);
            body.as_object_mut().unwrap().remove(field);
            (body.to_string().into_bytes(), json)
        }
        4 => {
            let mut body = valid;
            let huge = "x".repeat(server::http::api::MAX_BODY_BYTES + rng.below(1_000));
            match rng.below(3) {
                0 => body["creation_key"] = json!(huge),
                1 => body["input"]["document"]["title"] = json!(huge),
                _ => body["input"]["recipient"] = json!(huge),
            }
            (body.to_string().into_bytes(), json)
        }
        5 => {
            let mut body = valid;
            let nul = format!("a\u{0}{}", rng.below(10));
            match rng.below(5) {
                0 => body["creation_key"] = json!(nul),
                1 => body["definition"] = json!(nul),
                2 => body["input"]["adapter"] = json!(nul),
                3 => body["input"]["recipient"] = json!(nul),
                _ => body["input"]["document"]["body"] = json!(nul),
            }
            (body.to_string().into_bytes(), json)
        }
        6 => {
            let types = [
                None,
                Some("text/plain"),
                Some("application/x-www-form-urlencoded"),
                Some("multipart/form-data; boundary=x"),
                Some("application/jsonx"),
            ];
            (valid.to_string().into_bytes(), *rng.pick(&types))
        }
        7 => {
            let mut body = valid;
            body[rng.text()] = json!(rng.text());
            if body.as_object().unwrap().len() == 3 {
                body["unexpected"] = json!(1);
            }
            (body.to_string().into_bytes(), json)
        }
        _ => {
            let mut body = valid;
            body["input"] =
                json!({ "adapter": rng.text(), "recipient": 5, "document": rng.text() });
            (body.to_string().into_bytes(), json)
        }
    }
}

async fn fuzz_api(rng: &mut Rng, router: &axum::Router, token: &str, failures: &mut Failures) {
    for case in 0..API_CASES {
        let with_token = case % 5 != 0;
        let (route, request) = if case % 7 == 3 {
            let id = match rng.below(4) {
                0 => Uuid::now_v7().to_string(),
                1 => percent_encode(&rng.text().chars().take(2_000).collect::<String>()),
                2 => "%FF%FE".to_owned(),
                _ => "x".repeat(1 + rng.below(5_000)),
            };
            let uri = format!("/api/v1/workflows/{id}");
            ("GET /api/v1/workflows/{id}", Request::get(uri))
        } else {
            ("POST /api/v1/workflows", Request::post("/api/v1/workflows"))
        };
        let mut request = request;
        if with_token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        } else if rng.chance(50) {
            let forged = String::from_utf8_lossy(&rng.bytes(20)).replace(['\r', '\n'], "");
            if let Ok(value) = http::HeaderValue::from_str(&format!("Bearer {forged}")) {
                request = request.header(header::AUTHORIZATION, value);
            }
        }
        let body = if route.starts_with("POST") {
            let (body, content_type) = spoiled_start(rng);
            if let Some(content_type) = content_type {
                request = request.header(header::CONTENT_TYPE, content_type);
            }
            Body::from(body)
        } else {
            Body::empty()
        };
        let route = format!(
            "{route} {}",
            if with_token { "(token)" } else { "(no token)" }
        );
        let answer = send(router, request.body(body).unwrap()).await;
        let sentence = serde_json::from_str::<Value>(&answer.body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_owned));
        failures.check(&route, &answer, sentence);
    }
}

/// Values for a server function's fields: valid ones, so a case gets past the first check, and
/// spoiled ones. `version` never takes the step's real version, so no action can be carried out.
fn field_value(rng: &mut Rng, field: &str, step: Uuid, version: &str, csrf: &str) -> String {
    if rng.chance(25) {
        return rng.text();
    }
    match field {
        "csrf" if rng.chance(85) => csrf.to_owned(),
        "step" | "id" | "incident" => match rng.below(3) {
            0 => step.to_string(),
            1 => Uuid::now_v7().to_string(),
            _ => "not-a-uuid".to_owned(),
        },
        "version" => {
            let candidates = ["0", "-1", "99999999999999999999", "1.5", "abc", "7"];
            let v = *rng.pick(&candidates);
            if v == version {
                "8".to_owned()
            } else {
                v.to_owned()
            }
        }
        "action" => rng
            .pick(&[
                "check_destination",
                "retry_same_key",
                "attach_evidence",
                "waive",
                "authorize_new_attempt",
                "cancel",
                "replace",
                "force_success",
            ])
            .to_string(),
        "older_than" => rng
            .pick(&[
                "5",
                "-5",
                "153722867280912931",
                "9223372036854775807",
                "1e9",
                "x",
            ])
            .to_string(),
        "rate" => rng.pick(&["1", "0", "-3", "99999999999", "x"]).to_string(),
        "rows" => match rng.below(3) {
            0 => String::new(),
            1 => format!("{}:{}", Uuid::now_v7(), rng.below(5)),
            _ => format!("{step}:x,,{}", rng.text()),
        },
        "state" => rng
            .pick(&["review_required", "unknown", "invoking"])
            .to_string(),
        _ => rng.text(),
    }
}

/// The fields any server function takes, by name.
const FIELDS: [&str; 26] = [
    "csrf",
    "id",
    "step",
    "version",
    "action",
    "reason",
    "external_reference",
    "evidence",
    "residual_uncertainty",
    "acknowledge_duplicate_risk",
    "corrected_input",
    "incident",
    "canonical",
    "disposition",
    "state",
    "adapter",
    "definition",
    "older_than",
    "q",
    "after",
    "before",
    "actor",
    "rows",
    "rate",
    "username",
    "password",
];

/// A form body: a random subset of the fields, sometimes with raw bytes no form would carry.
fn spoiled_form(rng: &mut Rng, step: Uuid, version: &str, csrf: &str) -> (Vec<u8>, &'static str) {
    let form = "application/x-www-form-urlencoded";
    match rng.below(12) {
        0 => {
            let len = rng.below(3_000);
            return (rng.bytes(len), form);
        }
        1 => {
            let types = [
                "text/plain",
                "application/json",
                "multipart/form-data; boundary=x",
            ];
            let body = json!({"csrf": csrf, "id": step.to_string()}).to_string();
            return (body.into_bytes(), *rng.pick(&types));
        }
        _ => {}
    }
    let mut pairs = Vec::new();
    for field in FIELDS {
        if rng.chance(55) {
            let value = field_value(rng, field, step, version, csrf);
            pairs.push(format!("{field}={}", percent_encode(&value)));
        }
    }
    if rng.chance(15) {
        pairs.push(
            rng.pick(&["%FF%FE=%C3", "csrf", "=x", "a=%ZZ", "csrf=%00"])
                .to_string(),
        );
    }
    if rng.chance(10) && !pairs.is_empty() {
        let dup = pairs[rng.below(pairs.len())].clone();
        pairs.push(dup);
    }
    (pairs.join("&").into_bytes(), form)
}

/// The sentence a server function's refusal carries: its `ConsoleError`'s words when the body is
/// one, else the body itself.
fn console_sentence(body: &str) -> String {
    serde_json::from_str::<app::error::ConsoleError>(body)
        .map(|error| error.to_string())
        .unwrap_or_else(|_| body.to_owned())
}

async fn fuzz_server_fns(
    rng: &mut Rng,
    browser: &mut Browser,
    step: Uuid,
    version: &str,
    csrf: &str,
    failures: &mut Failures,
) {
    let mut paths: Vec<(&'static str, Method)> =
        leptos::server_fn::axum::server_fn_paths().collect();
    paths.sort_by_key(|(path, _)| *path);
    assert!(paths.len() >= 17, "{paths:?}");
    for case in 0..SERVER_FN_CASES {
        let (path, method) = paths[case % paths.len()].clone();
        let name = path
            .trim_start_matches("/fn/")
            .trim_end_matches(char::is_numeric);
        // Signing out, or in as somebody else, would end the session the other cases use.
        let csrf = if name.starts_with("sign_") {
            "stale"
        } else {
            csrf
        };
        let (body, content_type) = spoiled_form(rng, step, version, csrf);
        let request = if method == Method::GET {
            // A URI has a length limit of its own; the huge values go in bodies.
            let query: String = String::from_utf8_lossy(&body)
                .chars()
                .filter(|c| c.is_ascii_graphic())
                .take(8_000)
                .collect();
            (Request::get(format!("{path}?{query}")), Body::empty())
        } else {
            let request = Request::post(path).header(header::CONTENT_TYPE, content_type);
            (request, Body::from(body))
        };
        let (mut request, body) = request;
        if rng.chance(85) {
            request = request.header(header::ACCEPT, "application/json");
        }
        let answer = browser.send(request, body).await;
        let sentence = Some(console_sentence(&answer.body));
        failures.check(name, &answer, sentence);
    }
}

/// A browser in miniature: one session cookie, carried from answer to answer.
struct Browser {
    router: axum::Router,
    cookie: Option<String>,
}

impl Browser {
    async fn send(&mut self, request: http::request::Builder, body: Body) -> Answer {
        let request = match &self.cookie {
            Some(cookie) => request.header(header::COOKIE, cookie),
            None => request,
        };
        // Keeps the session cookie the router sets, then reads the answer as `send` does.
        let cookie = std::sync::Arc::new(std::sync::Mutex::new(None));
        let seen = cookie.clone();
        let router = self.router.clone().layer(axum::middleware::map_response(
            move |response: axum::response::Response| {
                let seen = seen.clone();
                async move {
                    if let Some(set) = response.headers().get(header::SET_COOKIE) {
                        let pair = set.to_str().unwrap().split(';').next().unwrap().to_owned();
                        *seen.lock().unwrap() = Some(pair);
                    }
                    response
                }
            },
        ));
        let answer = send(&router, request.body(body).unwrap()).await;
        if let Some(pair) = cookie.lock().unwrap().take() {
            self.cookie = Some(pair);
        }
        answer
    }

    async fn get(&mut self, uri: &str) -> Answer {
        self.send(Request::get(uri), Body::empty()).await
    }
}

/// The value of the first `<input name="{name}" value="…">` in `html`.
fn input_value(html: &str, name: &str) -> String {
    let at = html
        .find(&format!(r#"name="{name}""#))
        .unwrap_or_else(|| panic!("no input {name}"));
    let tag_start = html[..at].rfind('<').unwrap();
    let tag_end = at + html[at..].find('>').unwrap();
    let value = html[tag_start..tag_end].split(r#"value=""#).nth(1).unwrap();
    value[..value.find('"').unwrap()].to_owned()
}

/// An approver signed in through the sign-in form.
async fn signed_in_approver(pool: &PgPool, router: axum::Router) -> Browser {
    let password = engine::operators::add(pool, "fuzz-approver", Role::Approver)
        .await
        .unwrap();
    let mut browser = Browser {
        router,
        cookie: None,
    };
    let page = browser.get("/sign-in").await.body;
    let at = page.find(r#"action="/fn/sign_in"#).expect("a sign-in form");
    let rest = &page[at + r#"action=""#.len()..];
    let action = rest[..rest.find('"').unwrap()].to_owned();
    let form = format!(
        "username=fuzz-approver&password={}&csrf={}",
        percent_encode(&password),
        percent_encode(&input_value(&page, "csrf"))
    );
    let request = Request::post(action)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ACCEPT, "application/json");
    let answer = browser.send(request, Body::from(form)).await;
    assert!(answer.status.is_success() || answer.status.is_redirection());
    browser
}

/// A workflow whose delivery step waits for review, under an opaque adapter.
pub(crate) async fn step_under_review(pool: &PgPool) -> Uuid {
    crate::support::shipped(pool).await;
    let contract =
        engine::adapter::contracts::declared(engine::domain::ContractKind::Opaque, 1_000, 0, false);
    engine::adapter::apply::register_trusted(pool, "letters", "http://127.0.0.1:9", &contract)
        .await
        .unwrap();
    let new = engine::intake::NewWorkflow {
        creation_key: "fuzz-existing".into(),
        definition: "document_delivery".into(),
        version: None,
        input: json!({"adapter": "letters", "recipient": "r-1", "document": {"title": "t", "body": "b"}}),
    };
    let workflow = engine::intake::start_workflow(pool, new, Actor::Api("fuzz"))
        .await
        .unwrap()
        .id();
    fixture::under_review(pool, workflow, "deliver").await
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn no_malformed_or_random_body_makes_the_server_fail_or_write(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let token = NewToken {
        name: "fuzz",
        role: Role::Approver,
        creation_key_prefix: None,
        may_configure: true,
        adapters: None,
        on_behalf_of: None,
    };
    let token = engine::store::token::create(&pool, &token, Actor::Engine("fuzz"))
        .await
        .unwrap();
    let router = app(pool.clone());
    let mut browser = signed_in_approver(&pool, router.clone()).await;
    let page = browser.get(&format!("/steps/{step}")).await.body;
    let (version, csrf) = (input_value(&page, "version"), input_value(&page, "csrf"));
    let before = written(&pool).await;

    let mut rng = Rng(SEED);
    let mut failures = Failures::default();
    fuzz_api(&mut rng, &router, &token, &mut failures).await;
    fuzz_server_fns(&mut rng, &mut browser, step, &version, &csrf, &mut failures).await;

    assert_eq!(written(&pool).await, before, "a refused request wrote rows");
    assert!(
        failures.0.is_empty(),
        "{} of {} cases answered 5xx or a 4xx without a sentence:\n{}",
        failures.0.values().sum::<usize>(),
        API_CASES + SERVER_FN_CASES,
        failures.report()
    );
}
