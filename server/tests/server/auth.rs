//! Sign-in and sessions over HTTP: throttling, the audit of failures, sessions that follow the
//! account (disabled, role lowered, too old), and no session row for anonymous visitors.

use std::str::FromStr;

use engine::domain::Role;
use engine::store::journal::Actor;
use http::StatusCode;
use sqlx::PgPool;
use tower_sessions::SessionStore;
use tower_sessions_sqlx_store::PostgresStore;

use crate::console::{
    Browser, action_form, form_action, input_value, step_under_review, workflow_of,
};

/// Fetches the sign-in page and posts its form with `username` and `password`.
async fn sign_in(browser: &mut Browser, username: &str, password: &str) -> (StatusCode, String) {
    let (status, page) = browser.get("/sign-in").await;
    assert_eq!(status, StatusCode::OK);
    let action = form_action(&page, "sign_in");
    let csrf = input_value(&page, "csrf");
    browser
        .post(
            &action,
            &[
                ("username", username),
                ("password", password),
                ("csrf", &csrf),
            ],
        )
        .await
}

/// A new operator named `name` with `role`, signed in.
async fn signed_in_as(pool: &PgPool, name: &str, role: Role) -> Browser {
    let password = engine::operators::add(pool, name, role).await.unwrap();
    let mut browser = Browser::anonymous(pool);
    let (status, body) = sign_in(&mut browser, name, &password).await;
    assert!(
        status.is_success() || status.is_redirection(),
        "{status}: {body}"
    );
    browser
}

async fn session_rows(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from tower_sessions.session")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Posts `verb` on `step` with the token of the page `browser` drew last.
async fn act(
    browser: &mut Browser,
    action: &str,
    step: uuid::Uuid,
    csrf: &str,
) -> (StatusCode, String) {
    let version = {
        let mut conn = browser.pool.acquire().await.unwrap();
        engine::store::action::read_facts(&mut conn, step)
            .await
            .unwrap()
            .unwrap()
            .version
            .to_string()
    };
    browser
        .post(
            action,
            &[
                ("step", &step.to_string()),
                ("version", &version),
                ("csrf", csrf),
                ("action", "cancel"),
                ("reason", "testing sessions"),
            ],
        )
        .await
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn thirty_wrong_passwords_in_a_row_are_throttled_and_the_right_one_then_waits(pool: PgPool) {
    let password = engine::operators::add(&pool, "ada", Role::Approver)
        .await
        .unwrap();
    let mut attacker = Browser::anonymous(&pool);
    let (_, verifications_before) = engine::operators::argon2_runs();
    let mut statuses = Vec::new();
    let mut last = String::new();
    for _ in 0..30 {
        let (status, body) = sign_in(&mut attacker, "ada", "guess").await;
        statuses.push(status);
        last = body;
    }
    assert!(
        statuses[..5].iter().all(|s| *s == StatusCode::UNAUTHORIZED),
        "{statuses:?}"
    );
    assert!(
        statuses[5..]
            .iter()
            .all(|s| *s == StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    assert!(
        last.contains("Too many failed sign-ins for this account; try again in"),
        "{last}"
    );

    let mut owner = Browser::anonymous(&pool);
    let (status, body) = sign_in(&mut owner, "ada", &password).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert!(
        body.contains("Too many failed sign-ins for this account; try again in 15 minutes."),
        "{body}"
    );
    assert_eq!(
        session_rows(&pool).await,
        0,
        "the refused owner has no session"
    );
    let (_, verifications_after) = engine::operators::argon2_runs();
    assert_eq!(
        verifications_after - verifications_before,
        5,
        "only the five attempts before the wait checked a password"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn failed_sign_ins_are_counted_per_name_and_window_with_the_name_as_typed_and_none_audited(
    pool: PgPool,
) {
    engine::operators::add(&pool, "ada", Role::Viewer)
        .await
        .unwrap();
    let mut visitor = Browser::anonymous(&pool);
    let (status, _) = sign_in(&mut visitor, "  Nobody Here ", "x").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    for _ in 0..6 {
        sign_in(&mut visitor, "ada", "guess").await;
    }
    let counted: Vec<(String, i32, i32, String)> = sqlx::query_as(
        "select username, failures, throttled, last_address from sign_in_failure order by username",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        counted,
        [
            ("Nobody Here".to_owned(), 1, 0, "unknown".to_owned()),
            ("ada".to_owned(), 6, 1, "unknown".to_owned()),
        ]
    );
    let audited: i64 =
        sqlx::query_scalar("select count(*) from audit where action = 'sign_in_failed'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(audited, 0, "no failure leaves a permanent row of its own");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_disabled_operators_open_session_is_refused_on_its_next_request(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let mut ada = signed_in_as(&pool, "ada", Role::Approver).await;
    let (action, _, csrf) = action_form(&mut ada, step).await;
    assert_eq!(session_rows(&pool).await, 1);

    engine::operators::disable(&pool, "ada", Actor::Engine("test"))
        .await
        .unwrap();
    let (status, body) = act(&mut ada, &action, step, &csrf).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body.contains("Sign in"), "{body}");
    assert_eq!(session_rows(&pool).await, 0, "the session is deleted");
    let state: String = sqlx::query_scalar("select state::text from step where id = $1")
        .bind(step)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(state, "review_required");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_lowered_role_loses_its_forms_and_its_posts_are_refused(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let mut ada = signed_in_as(&pool, "ada", Role::Approver).await;
    let (action, _, _) = action_form(&mut ada, step).await;

    engine::operators::set_role(&pool, "ada", Role::Viewer, Actor::Engine("test"))
        .await
        .unwrap();
    let (status, page) = ada.get(&format!("/steps/{step}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !page.contains(r#"action="/fn/act_on_step"#),
        "a viewer's page draws no action form"
    );
    assert!(
        page.contains("(viewer)"),
        "the header shows the current role"
    );
    let csrf = input_value(&page, "csrf");
    let (status, body) = act(&mut ada, &action, step, &csrf).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("needs the approver role"), "{body}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_session_older_than_its_lifetime_is_signed_out_however_active(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let mut ada = signed_in_as(&pool, "ada", Role::Approver).await;
    let (action, _, csrf) = action_form(&mut ada, step).await;

    // As if ada had signed in 12 hours and a minute ago and stayed active since.
    age_session(&pool, &ada, "signed_in_at", 12 * 60 * 60 + 60).await;

    let (status, body) = act(&mut ada, &action, step, &csrf).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(session_rows(&pool).await, 0);
}

/// Writes the time `seconds` before now under `key` in `browser`'s session: `signed_in_at`, as
/// if it had signed in that long ago and stayed active since; `seen_at`, as if its idle expiry
/// had last been renewed then.
async fn age_session(pool: &PgPool, browser: &Browser, key: &str, seconds: i64) {
    let cookie = browser.cookie.clone().unwrap();
    let id = tower_sessions::session::Id::from_str(cookie.split_once('=').unwrap().1).unwrap();
    let store = PostgresStore::new(pool.clone());
    let mut record = store.load(&id).await.unwrap().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let then = now - seconds;
    record.data.insert(key.into(), serde_json::json!(then));
    store.save(&record).await.unwrap();
}

/// The only session row's version (its `xmin`) and idle expiry: every write makes a new version.
async fn session_row(pool: &PgPool) -> (String, chrono::DateTime<chrono::Utc>) {
    sqlx::query_as("select xmin::text, expiry_date from tower_sessions.session")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn reading_pages_writes_the_session_only_to_renew_its_idle_expiry_once_in_five_minutes(
    pool: PgPool,
) {
    let step = step_under_review(&pool).await;
    let workflow = workflow_of(&pool, step).await;
    let mut ada = signed_in_as(&pool, "ada", Role::Approver).await;
    let signed_in = session_row(&pool).await;
    let (step_page, workflow_page) = (format!("/steps/{step}"), format!("/workflows/{workflow}"));
    let pages = [
        "/",
        "/overview",
        &step_page,
        &workflow_page,
        "/workflows",
        "/incidents",
        "/adapters",
        "/audit",
    ];
    for page in pages {
        let (status, body) = ada.get(page).await;
        assert_eq!(status, StatusCode::OK, "{page}: {body}");
        assert_eq!(
            session_row(&pool).await,
            signed_in,
            "{page} wrote the session"
        );
    }

    // As if the idle expiry had last been renewed five minutes ago: the next page renews it,
    // and the one after it does not.
    age_session(&pool, &ada, "seen_at", 5 * 60).await;
    let aged = session_row(&pool).await;
    ada.get(&step_page).await;
    let renewed = session_row(&pool).await;
    assert_ne!(renewed.0, aged.0, "the page renewed the idle expiry");
    assert!(renewed.1 > aged.1, "{renewed:?} after {aged:?}");
    ada.get("/workflows").await;
    assert_eq!(session_row(&pool).await, renewed);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_password_reset_ends_the_sessions_signed_in_before_it(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let mut ada = signed_in_as(&pool, "ada", Role::Approver).await;
    let (action, _, csrf) = action_form(&mut ada, step).await;
    age_session(&pool, &ada, "signed_in_at", 60).await;

    engine::operators::reset_password(&pool, "ada", Actor::Engine("test"))
        .await
        .unwrap();
    let (status, body) = act(&mut ada, &action, step, &csrf).await;

    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(session_rows(&pool).await, 0, "the session is deleted");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_anonymous_visit_to_the_sign_in_page_stores_no_session(pool: PgPool) {
    let mut visitor = Browser::anonymous(&pool);
    for page in ["/sign-in", "/", "/sign-in"] {
        // The home page refuses a visitor (401) but draws the header's menu all the same.
        let (status, _) = visitor.get(page).await;
        assert!(status.is_success() || page == "/", "{page}: {status}");
    }
    assert_eq!(session_rows(&pool).await, 0);
    assert_eq!(visitor.cookie, None, "no cookie either");

    let password = engine::operators::add(&pool, "ada", Role::Viewer)
        .await
        .unwrap();
    let (_, page) = visitor.get("/sign-in").await;
    let action = form_action(&page, "sign_in");
    let csrf = input_value(&page, "csrf");
    for forged in [String::new(), "1.00".into(), csrf.replace('.', ".0")] {
        let (status, body) = visitor
            .post(
                &action,
                &[
                    ("username", "ada"),
                    ("password", &password),
                    ("csrf", &forged),
                ],
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{forged}: {body}");
    }
    let (status, body) = visitor
        .post(
            &action,
            &[
                ("username", "ada"),
                ("password", &password),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert!(
        status.is_success() || status.is_redirection(),
        "{status}: {body}"
    );
    assert_eq!(session_rows(&pool).await, 1);
    let (_, home) = visitor.get("/").await;
    assert!(home.contains("Signed in as ada (viewer)"), "{home}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_sign_in_posted_from_another_site_is_refused_even_with_a_valid_token(pool: PgPool) {
    let password = engine::operators::add(&pool, "ada", Role::Viewer)
        .await
        .unwrap();
    let mut visitor = Browser::anonymous(&pool);
    let (_, page) = visitor.get("/sign-in").await;
    let action = form_action(&page, "sign_in");
    let csrf = input_value(&page, "csrf");
    let body = format!("username=ada&password={password}&csrf={csrf}");
    let (status, answer) = visitor
        .send(
            http::Request::post(&action)
                .header(
                    http::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .header(http::header::ACCEPT, "application/json")
                .header("sec-fetch-site", "cross-site"),
            axum::body::Body::from(body),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{answer}");
    assert_eq!(session_rows(&pool).await, 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_sign_in_page_shows_only_the_servers_own_refusals_whatever_a_link_carries(
    pool: PgPool,
) {
    use leptos::server_fn::error::ServerFnUrlError;
    let mut visitor = Browser::anonymous(&pool);
    let (_, page) = visitor.get("/sign-in").await;
    let path = form_action(&page, "sign_in");
    let link = |error: app::error::ConsoleError| {
        let url = ServerFnUrlError::new(&path, error)
            .to_url("http://localhost/sign-in")
            .unwrap();
        format!("/sign-in?{}", url.query().unwrap())
    };
    let planted = "Your account is locked: call +1 555 0100 to unlock it.";
    for error in [
        app::error::ConsoleError::SignIn {
            reason: planted.into(),
        },
        app::error::ConsoleError::Throttled {
            reason: planted.into(),
        },
        app::error::ConsoleError::Invalid {
            reason: planted.into(),
        },
    ] {
        let (status, shown) = visitor.get(&link(error)).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            !shown.contains("555 0100"),
            "the link's text is on the page"
        );
    }
    // The server's own sentence, carried the same way, is shown.
    let own = app::error::ConsoleError::SignIn {
        reason: "Unknown username or wrong password.".into(),
    };
    let (_, shown) = visitor.get(&link(own)).await;
    assert!(
        shown.contains("Unknown username or wrong password."),
        "{shown}"
    );
}

/// Every `name="csrf"` input's value in `html`, in order.
fn csrf_values(html: &str) -> Vec<String> {
    html.match_indices(r#"name="csrf""#)
        .map(|(at, _)| {
            let start = html[..at].rfind('<').unwrap();
            let end = at + html[at..].find('>').unwrap();
            let value = html[start..end].split(r#"value=""#).nth(1).unwrap();
            value[..value.find('"').unwrap()].to_owned()
        })
        .collect()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_first_page_after_signing_in_carries_one_token_in_every_form_and_each_is_accepted(
    pool: PgPool,
) {
    // The header's sign-out form and the page's own forms ask for the token at once; a token
    // made on first use by each of them would leave forms carrying one the session lost.
    let step = step_under_review(&pool).await;
    for round in 0..40 {
        let mut olga = signed_in_as(&pool, &format!("olga-{round}"), Role::Operator).await;
        let path = if round % 2 == 0 {
            format!("/steps/{step}")
        } else {
            "/workflows".to_owned()
        };
        let (status, page) = olga.get(&path).await;
        assert_eq!(status, StatusCode::OK);
        let tokens = csrf_values(&page);
        assert!(
            tokens.len() >= 2,
            "the header's form and the page's: {tokens:?}"
        );
        assert!(tokens.iter().all(|t| *t == tokens[0]), "{tokens:?}");
        let (status, body) = olga
            .post(&form_action(&page, "sign_out"), &[("csrf", &tokens[0])])
            .await;
        assert!(
            status.is_success() || status.is_redirection(),
            "the token the page carries is the session's: {status} {body}"
        );
    }
}
