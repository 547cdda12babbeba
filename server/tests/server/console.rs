//! The console's state-changing server functions, driven in-process over HTTP with a real
//! session: every refusal (no session, wrong role, missing CSRF token, malformed fields, an
//! action the contract forbids) answers with a status and a sentence, and changes nothing.

use axum::body::Body;
use http::{Request, StatusCode, header};
use sqlx::PgPool;
use tower::ServiceExt;

use crate::support::{app, fixture};
use uuid::Uuid;

/// A browser in miniature: one session cookie, carried from answer to answer.
pub(crate) struct Browser {
    pub(crate) pool: PgPool,
    pub(crate) cookie: Option<String>,
}

impl Browser {
    /// A browser that has not signed in.
    pub(crate) fn anonymous(pool: &PgPool) -> Self {
        Browser {
            pool: pool.clone(),
            cookie: None,
        }
    }

    pub(crate) async fn send(
        &mut self,
        request: http::request::Builder,
        body: Body,
    ) -> (StatusCode, String) {
        let request = match &self.cookie {
            Some(cookie) => request.header(header::COOKIE, cookie),
            None => request,
        };
        let response = app(self.pool.clone())
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        if let Some(set) = response.headers().get(header::SET_COOKIE) {
            let pair = set.to_str().unwrap().split(';').next().unwrap().to_owned();
            self.cookie = Some(pair);
        }
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    pub(crate) async fn get(&mut self, uri: &str) -> (StatusCode, String) {
        self.send(Request::get(uri), Body::empty()).await
    }

    /// Posts a form as the live page does (asking for JSON back).
    pub(crate) async fn post(&mut self, uri: &str, form: &[(&str, &str)]) -> (StatusCode, String) {
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", engine::domain::identity::percent_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        self.send(
            Request::post(uri)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(header::ACCEPT, "application/json"),
            Body::from(body),
        )
        .await
    }
}

/// The value of the first `<input name="{name}" value="…">` in `html`, in either order.
pub(crate) fn input_value(html: &str, name: &str) -> String {
    let at = html
        .find(&format!(r#"name="{name}""#))
        .unwrap_or_else(|| panic!("no input {name}"));
    let tag_start = html[..at].rfind('<').unwrap();
    let tag_end = at + html[at..].find('>').unwrap();
    let tag = &html[tag_start..tag_end];
    let value = tag.split(r#"value=""#).nth(1).unwrap();
    value[..value.find('"').unwrap()].to_owned()
}

/// The `action` of the first form posting to a server function named `prefix…`.
pub(crate) fn form_action(html: &str, prefix: &str) -> String {
    let at = html
        .find(&format!(r#"action="/fn/{prefix}"#))
        .unwrap_or_else(|| panic!("no form for {prefix}"));
    let rest = &html[at + r#"action=""#.len()..];
    rest[..rest.find('"').unwrap()].to_owned()
}

/// A signed-in session for a new operator with `role`.
pub(crate) async fn signed_in(pool: &PgPool, role: engine::domain::Role) -> Browser {
    crate::support::shipped(pool).await;
    let name = format!(
        "{}-{}",
        format!("{role:?}").to_lowercase(),
        &Uuid::new_v4().simple().to_string()[..6]
    );
    let password = engine::operators::add(pool, &name, role).await.unwrap();
    let mut browser = Browser::anonymous(pool);
    let (_, page) = browser.get("/sign-in").await;
    let action = form_action(&page, "sign_in");
    let csrf = input_value(&page, "csrf");
    let (status, body) = browser
        .post(
            &action,
            &[
                ("username", &name),
                ("password", &password),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert!(
        status.is_success() || status.is_redirection(),
        "{status}: {body}"
    );
    browser
}

/// An opaque adapter, and one workflow whose delivery step waits for review.
pub(crate) async fn step_under_review(pool: &PgPool) -> Uuid {
    fixture_review_step(pool, engine::domain::ContractKind::Opaque, "console-test").await
}

/// The workflow of step `step`.
pub(crate) async fn workflow_of(pool: &PgPool, step: Uuid) -> Uuid {
    sqlx::query_scalar("select workflow_id from step where id = $1")
        .bind(step)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// An adapter of contract `kind` at an address where nothing listens, and one workflow
/// (created under `creation_key`) whose delivery step waits for review, never sent.
pub(crate) async fn fixture_review_step(
    pool: &PgPool,
    kind: engine::domain::ContractKind,
    creation_key: &str,
) -> Uuid {
    crate::support::shipped(pool).await;
    let adapter = format!("letters-{}", kind.as_str());
    let contract = engine::adapter::contracts::declared(kind, 1_000, 0, false);
    engine::adapter::apply::register_trusted(pool, &adapter, "http://127.0.0.1:9", &contract)
        .await
        .unwrap();
    let started = engine::intake::start_workflow(
        pool,
        engine::intake::NewWorkflow {
            creation_key: creation_key.into(),
            definition: "document_delivery".into(),
            version: None,
            input: serde_json::json!({"adapter": adapter, "recipient": "r-1", "document": {"title": "t", "body": "b"}}),
        },
        engine::store::journal::Actor::Api("test"),
    )
    .await
    .unwrap();
    let workflow = started.id();
    fixture::under_review(pool, workflow, "deliver").await
}

async fn audit_count(pool: &PgPool, step: Uuid) -> i64 {
    sqlx::query_scalar("select count(*) from audit where step_id = $1")
        .bind(step)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The action form's fields as the step page drew them for this session.
pub(crate) async fn action_form(browser: &mut Browser, step: Uuid) -> (String, String, String) {
    let (status, page) = browser.get(&format!("/steps/{step}")).await;
    assert_eq!(status, StatusCode::OK);
    (
        form_action(&page, "act_on_step"),
        input_value(&page, "version"),
        input_value(&page, "csrf"),
    )
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_refused_action_post_answers_in_words_and_changes_nothing(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let mut approver = signed_in(&pool, engine::domain::Role::Approver).await;
    let (action, version, csrf) = action_form(&mut approver, step).await;
    let step_id = step.to_string();
    let post = |action_name: &'static str, extra: Vec<(&'static str, String)>| {
        let mut form = vec![
            ("step", step_id.clone()),
            ("version", version.clone()),
            ("csrf", csrf.clone()),
            ("action", action_name.to_owned()),
            ("reason", "testing".to_owned()),
        ];
        for (k, v) in extra {
            form.retain(|(key, _)| *key != k);
            form.push((k, v));
        }
        form
    };
    /// A form, the status it must answer, and a sentence its answer must contain.
    type Case = (Vec<(&'static str, String)>, StatusCode, &'static str);
    let cases: Vec<Case> = vec![
        (
            post("retry_same_key", vec![]),
            StatusCode::FORBIDDEN,
            "is not permitted for a step that is review required",
        ),
        (
            post("force_success", vec![]),
            StatusCode::UNPROCESSABLE_ENTITY,
            "is not an action the console knows",
        ),
        (
            post(
                "waive",
                vec![
                    ("reason", String::new()),
                    ("residual_uncertainty", "x".into()),
                ],
            ),
            StatusCode::UNPROCESSABLE_ENTITY,
            "A reason is required",
        ),
        (
            post("authorize_another_attempt", vec![]),
            StatusCode::UNPROCESSABLE_ENTITY,
            "acknowledge that risk",
        ),
        (
            post(
                "attach_evidence",
                vec![("external_reference", "x-1".into())],
            ),
            StatusCode::FORBIDDEN,
            "Attach evidence is not permitted",
        ),
        (
            post("waive", vec![("version", "yesterday".into())]),
            StatusCode::CONFLICT,
            "no valid step version",
        ),
        (
            post(
                "waive",
                vec![
                    ("version", "1".into()),
                    ("residual_uncertainty", "x".into()),
                ],
            ),
            StatusCode::CONFLICT,
            "changed since your page was drawn",
        ),
        (
            post("cancel", vec![("csrf", "forged".into())]),
            StatusCode::CONFLICT,
            "did not come from this console",
        ),
        (
            post("cancel", vec![("step", Uuid::nil().to_string())]),
            StatusCode::NOT_FOUND,
            "",
        ),
    ];
    for (form, status, sentence) in cases {
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (got, body) = approver.post(&action, &pairs).await;
        assert_eq!(got, status, "{pairs:?}: {body}");
        assert!(body.contains(sentence), "{pairs:?}: {body}");
    }
    assert_eq!(audit_count(&pool, step).await, 0);
    let state: String = sqlx::query_scalar("select state::text from step where id = $1")
        .bind(step)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "review_required");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn roles_are_checked_on_the_server_whatever_the_page_offered(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let mut approver = signed_in(&pool, engine::domain::Role::Approver).await;
    let (action, _, _) = action_form(&mut approver, step).await;
    for (role, verb, needs) in [
        (
            engine::domain::Role::Viewer,
            "cancel",
            "needs the approver role",
        ),
        (
            engine::domain::Role::Operator,
            "cancel",
            "needs the approver role",
        ),
        (
            engine::domain::Role::Viewer,
            "waive",
            "needs the approver role",
        ),
    ] {
        let mut browser = signed_in(&pool, role).await;
        let (status, page) = browser.get(&format!("/steps/{step}")).await;
        assert_eq!(status, StatusCode::OK);
        let csrf = input_value(&page, "csrf");
        let version = {
            let mut conn = pool.acquire().await.unwrap();
            engine::store::action::read_facts(&mut conn, step)
                .await
                .unwrap()
                .unwrap()
                .version
                .to_string()
        };
        let (got, body) = browser
            .post(
                &action,
                &[
                    ("step", &step.to_string()),
                    ("version", &version),
                    ("csrf", &csrf),
                    ("action", verb),
                    ("reason", "not mine to decide"),
                    ("residual_uncertainty", "x"),
                ],
            )
            .await;
        assert_eq!(got, StatusCode::FORBIDDEN, "{role:?} {verb}: {body}");
        assert!(body.contains(needs), "{role:?} {verb}: {body}");
    }
    let mut stranger = Browser {
        pool: pool.clone(),
        cookie: None,
    };
    let (status, body) = stranger
        .post(
            &action,
            &[
                ("step", &step.to_string()),
                ("version", "1"),
                ("csrf", ""),
                ("action", "cancel"),
                ("reason", "who am I"),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("Sign in"), "{body}");
    assert_eq!(audit_count(&pool, step).await, 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_form_posted_without_its_csrf_field_answers_422_with_a_sentence(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let mut approver = signed_in(&pool, engine::domain::Role::Approver).await;
    let (action, version, _) = action_form(&mut approver, step).await;
    let before = audit_count(&pool, step).await;

    let (status, body) = approver
        .post(
            &action,
            &[
                ("step", &step.to_string()),
                ("version", &version),
                ("action", "cancel"),
                ("reason", "no token"),
            ],
        )
        .await;

    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.contains("This form is missing a field"), "{body}");
    assert!(!body.contains("deserializ"), "{body}");
    assert_eq!(audit_count(&pool, step).await, before);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_viewer_starting_a_bulk_run_is_refused_with_a_sentence_naming_the_role(pool: PgPool) {
    use leptos::server_fn::ServerFn;

    let step = step_under_review(&pool).await;
    let mut viewer = signed_in(&pool, engine::domain::Role::Viewer).await;
    let (_, page) = viewer.get("/").await;
    let csrf = input_value(&page, "csrf");

    let (status, body) = viewer
        .post(
            app::bulk::api::StartBulk::PATH,
            &[
                ("action", "retry_same_key"),
                ("rows", &format!("{step}:1")),
                ("reason", "all of them"),
                ("rate", "5"),
                ("csrf", &csrf),
            ],
        )
        .await;

    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(
        body.contains("This needs the operator role or higher; you are signed in as viewer."),
        "{body}"
    );
    let runs: i64 = sqlx::query_scalar("select count(*) from bulk_run")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(runs, 0);
}
