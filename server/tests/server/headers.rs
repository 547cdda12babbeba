//! Security headers on every response: pages carry a policy naming their own hydration script's
//! nonce, and nothing may frame, sniff or cache what the console sends.

use axum::body::Body;
use http::{HeaderMap, Request};
use sqlx::PgPool;
use tower::ServiceExt;

use crate::support::app;

async fn headers_and_body(pool: &PgPool, uri: &str) -> (HeaderMap, String) {
    let response = app(pool.clone())
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (headers, String::from_utf8_lossy(&body).into_owned())
}

fn header<'h>(headers: &'h HeaderMap, name: &str) -> &'h str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("no {name} header"))
}

const PAGES: [&str; 13] = [
    "/",
    "/incidents",
    "/overview",
    "/adapters",
    "/sign-in",
    "/audit",
    "/bulk",
    "/bulk/0190b5a0-0000-7000-8000-000000000000",
    "/steps/0190b5a0-0000-7000-8000-000000000000",
    "/incidents/0190b5a0-0000-7000-8000-000000000000",
    "/workflows/0190b5a0-0000-7000-8000-000000000000",
    "/status/0190b5a0-0000-7000-8000-000000000000",
    "/no-such-page",
];

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_page_allows_only_its_own_scripts_and_cannot_be_framed_sniffed_or_cached(
    pool: PgPool,
) {
    for page in PAGES {
        let (headers, html) = headers_and_body(&pool, page).await;
        let policy = header(&headers, "content-security-policy");
        assert!(
            policy.contains("frame-ancestors 'none'"),
            "{page}: {policy}"
        );
        assert!(policy.contains("default-src 'self'"), "{page}: {policy}");
        assert!(!policy.contains("unsafe-inline"), "{page}: {policy}");
        let nonce = policy
            .split("'nonce-")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap_or_else(|| panic!("{page}: the policy names no nonce: {policy}"));
        // Every inline script the page carries is the one the policy allows.
        let scripts = html.matches("<script").count();
        let allowed = html.matches(&format!("nonce=\"{nonce}\"")).count();
        assert!(
            scripts > 0 && allowed >= scripts,
            "{page}: {scripts} scripts, {allowed} with the nonce"
        );
        assert_eq!(header(&headers, "x-frame-options"), "DENY", "{page}");
        assert_eq!(
            header(&headers, "x-content-type-options"),
            "nosniff",
            "{page}"
        );
        assert_eq!(header(&headers, "referrer-policy"), "same-origin", "{page}");
        assert_eq!(header(&headers, "cache-control"), "no-store", "{page}");
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn two_page_loads_get_two_nonces(pool: PgPool) {
    let (first, _) = headers_and_body(&pool, "/sign-in").await;
    let (second, _) = headers_and_body(&pool, "/sign-in").await;
    assert_ne!(
        header(&first, "content-security-policy"),
        header(&second, "content-security-policy")
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn answers_that_are_not_pages_allow_nothing_to_run_and_are_not_cached(pool: PgPool) {
    for uri in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/v1/openapi.json",
        "/api/v1/workflows/x",
    ] {
        let (headers, _) = headers_and_body(&pool, uri).await;
        assert!(
            header(&headers, "content-security-policy").starts_with("default-src 'none'"),
            "{uri}"
        );
        assert_eq!(
            header(&headers, "x-content-type-options"),
            "nosniff",
            "{uri}"
        );
        assert_eq!(header(&headers, "x-frame-options"), "DENY", "{uri}");
        assert_eq!(header(&headers, "cache-control"), "no-store", "{uri}");
    }
}
