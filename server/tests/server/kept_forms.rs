//! Forms posted without JavaScript (the browser accepts HTML), refused: the answer is a redirect
//! back to the page, which says why and draws the form with what was typed; never a status with
//! a JSON body that a browser would show as it is.

use axum::body::Body;
use http::{Request, StatusCode, header};
use sqlx::PgPool;
use tower::ServiceExt;

use crate::console::{
    Browser, action_form, form_action, input_value, signed_in, step_under_review,
};
use crate::support::app;

/// What a plain form post answered: its status, its `Location`, its body.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) location: String,
    pub(crate) body: String,
}

/// Posts `form` to `uri` as a browser without JavaScript does, from the page at `referer`.
pub(crate) async fn post_plain(
    browser: &mut Browser,
    uri: &str,
    referer: &str,
    form: &[(&str, &str)],
) -> Answer {
    let body = form
        .iter()
        .map(|(k, v)| format!("{k}={}", engine::domain::identity::percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let mut request = Request::post(uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::ACCEPT, "text/html,application/xhtml+xml,*/*;q=0.8")
        .header(header::REFERER, format!("http://127.0.0.1:3000{referer}"));
    if let Some(cookie) = &browser.cookie {
        request = request.header(header::COOKIE, cookie);
    }
    let response = app(browser.pool.clone())
        .oneshot(request.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    if let Some(set) = response.headers().get(header::SET_COOKIE) {
        browser.cookie = Some(set.to_str().unwrap().split(';').next().unwrap().to_owned());
    }
    let status = response.status();
    let location = response
        .headers()
        .get(header::LOCATION)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    Answer {
        status,
        location,
        body: String::from_utf8(body.to_vec()).unwrap(),
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_refused_action_returns_to_its_page_with_the_sentence_and_what_was_typed_once(
    pool: PgPool,
) {
    let step = step_under_review(&pool).await;
    let mut approver = signed_in(&pool, engine::domain::Role::Approver).await;
    let (action, version, csrf) = action_form(&mut approver, step).await;
    let page = format!("/steps/{step}");
    let answer = post_plain(
        &mut approver,
        &action,
        &page,
        &[
            ("step", &step.to_string()),
            ("version", &version),
            ("csrf", &csrf),
            ("action", "waive"),
            ("residual_uncertainty", "   "),
            ("reason", "the letter was read out by the support desk"),
        ],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    // The refusal waits in the session: the address is the page's alone.
    assert_eq!(answer.location, page);
    assert!(answer.body.is_empty(), "{}", answer.body);
    let (status, html) = approver.get(&page).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("data-testid=\"refusal\""), "{html}");
    assert!(
        html.contains("The residual uncertainty is required."),
        "no sentence in the page"
    );
    assert!(
        html.contains(">the letter was read out by the support desk</textarea>"),
        "the reason was not kept"
    );
    // Said once: the next visit draws the page as it is.
    let (_, again) = approver.get(&page).await;
    assert!(!again.contains("The residual uncertainty is required."));
    assert!(!again.contains("read out by the support desk"));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_refusal_for_an_action_the_page_does_not_offer_is_said_at_the_top_with_what_was_written(
    pool: PgPool,
) {
    let step = step_under_review(&pool).await;
    let mut approver = signed_in(&pool, engine::domain::Role::Approver).await;
    let (action, version, csrf) = action_form(&mut approver, step).await;
    let page = format!("/steps/{step}");
    // An opaque adapter's contract never permits a retry under the same key.
    let answer = post_plain(
        &mut approver,
        &action,
        &page,
        &[
            ("step", &step.to_string()),
            ("version", &version),
            ("csrf", &csrf),
            ("action", "retry_same_key"),
            ("reason", "my careful words"),
        ],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    let (_, html) = approver.get(&page).await;
    let top = html
        .find("data-testid=\"refusal\"")
        .expect("no refusal on the page");
    let permitted = html.find("data-testid=\"permitted\"").expect("no actions");
    assert!(top < permitted, "the refusal is not above the actions");
    assert!(html.contains("is not permitted for a step that is review required"));
    assert!(html.contains("my careful words"));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_refused_sign_in_keeps_only_the_username_in_the_address_and_stores_no_session(
    pool: PgPool,
) {
    engine::operators::add(&pool, "ada", engine::domain::Role::Viewer)
        .await
        .unwrap();
    let mut visitor = Browser::anonymous(&pool);
    let (_, page) = visitor.get("/sign-in").await;
    let action = form_action(&page, "sign_in");
    let csrf = input_value(&page, "csrf");
    let answer = post_plain(
        &mut visitor,
        &action,
        "/sign-in",
        &[
            ("username", "ada"),
            ("password", "hunter2"),
            ("csrf", &csrf),
        ],
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert!(
        answer
            .location
            .starts_with("/sign-in?username=ada&__path=%2Ffn%2Fsign_in"),
        "{}",
        answer.location
    );
    assert!(!answer.location.contains("hunter2"));
    let sessions: i64 = sqlx::query_scalar("select count(*) from tower_sessions.session")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0, "a visitor's refused sign-in wrote a session");
    let (status, html) = visitor.get(&answer.location).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains("Unknown username or wrong password."),
        "{html}"
    );
    assert!(html.contains("value=\"ada\""), "the username was not kept");
    assert!(!html.contains("hunter2"));

    // Refused again from that address (a forged token this time): only the newest refusal stays.
    let second = post_plain(
        &mut visitor,
        &action,
        &answer.location,
        &[("username", "ada"), ("password", "x"), ("csrf", "forged")],
    )
    .await;
    assert_eq!(second.status, StatusCode::SEE_OTHER);
    assert_eq!(
        second.location.matches("__err=").count(),
        1,
        "{}",
        second.location
    );
    assert_eq!(
        second.location.matches("username=").count(),
        1,
        "{}",
        second.location
    );
    let (_, html) = visitor.get(&second.location).await;
    assert!(html.contains("did not come from this console"), "{html}");
    assert!(!html.contains("Unknown username or wrong password."));
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_form_posted_by_the_live_page_still_answers_its_status_and_sentence(pool: PgPool) {
    let step = step_under_review(&pool).await;
    let mut approver = signed_in(&pool, engine::domain::Role::Approver).await;
    let (action, version, csrf) = action_form(&mut approver, step).await;
    let (status, body) = approver
        .post(
            &action,
            &[
                ("step", &step.to_string()),
                ("version", &version),
                ("csrf", &csrf),
                ("action", "cancel"),
                ("reason", " "),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.contains("A reason is required"), "{body}");
}
