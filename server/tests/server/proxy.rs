//! Behind a TLS-terminating proxy (`serve --behind-tls-proxy`): the session cookie is a
//! `__Host-` cookie, and sign-in counts the client the proxy names, not the proxy.

use axum::body::Body;
use http::{Request, StatusCode, header};
use leptos::prelude::LeptosOptions;
use server::http::proxy::Exposure;
use server::http::router_for;
use server::state::AppState;
use sqlx::PgPool;
use tower::ServiceExt;

use crate::console::{form_action, input_value};

fn behind_proxy(pool: &PgPool) -> axum::Router {
    router_for(
        AppState::new(
            pool.clone(),
            LeptosOptions::builder().output_name("z29c").build(),
        ),
        Exposure::BehindTlsProxy,
    )
}

/// Posts the sign-in form as the proxy forwards it for a client; returns the answer's status
/// and its `Set-Cookie`, if any.
async fn sign_in(pool: &PgPool, name: &str, password: &str) -> (StatusCode, Option<String>) {
    let page = behind_proxy(pool)
        .oneshot(Request::get("/sign-in").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let html = String::from_utf8(
        axum::body::to_bytes(page.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    let body = format!(
        "username={name}&password={password}&csrf={}",
        input_value(&html, "csrf")
    );
    let answer = behind_proxy(pool)
        .oneshot(
            Request::post(form_action(&html, "sign_in"))
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(header::ACCEPT, "application/json")
                .header("x-forwarded-for", "203.0.113.9, 198.51.100.7")
                .body(Body::from(body))
                .unwrap(),
        )
        .await
        .unwrap();
    let cookie = answer
        .headers()
        .get(header::SET_COOKIE)
        .map(|v| v.to_str().unwrap().to_owned());
    (answer.status(), cookie)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn behind_a_tls_proxy_the_session_cookie_is_a_host_cookie_for_https_only(pool: PgPool) {
    let password = engine::operators::add(&pool, "ada", engine::domain::Role::Viewer)
        .await
        .unwrap();
    let (status, cookie) = sign_in(&pool, "ada", &password).await;
    assert!(status.is_success() || status.is_redirection(), "{status}");
    let cookie = cookie.expect("signing in sets the session cookie");
    assert!(cookie.starts_with("__Host-z29c_session="), "{cookie}");
    for attribute in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Domain"), "{cookie}");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn behind_a_tls_proxy_a_failed_sign_in_counts_the_client_the_proxy_named(pool: PgPool) {
    engine::operators::add(&pool, "ada", engine::domain::Role::Viewer)
        .await
        .unwrap();
    let (status, _) = sign_in(&pool, "ada", "guess").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let address: String =
        sqlx::query_scalar("select last_address from sign_in_failure where username = 'ada'")
            .fetch_one(&pool)
            .await
            .unwrap();
    // The last entry is the one the proxy appended; the first is only the client's word.
    assert_eq!(address, "198.51.100.7");
}
