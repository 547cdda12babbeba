//! Security headers on every response (docs/DESIGN.md §15).
//!
//! Pages carry a Content-Security-Policy naming the per-response nonce Leptos puts on its
//! hydration script (the shell writes it, see `app::shell`); every other response gets a policy
//! that allows nothing at all. Nothing is framed, sniffed, cached or sent a full referrer,
//! except the console's static files under `/pkg/`, whose cache lifetimes `super::assets` sets
//! (docs/DESIGN.md §18).

use axum::extract::Request;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// The policy of a response that is not a page: no script, no style, no framing.
const NOTHING: &str =
    "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Adds the security headers to `request`'s response, leaving a page's own policy in place.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let static_file = request.uri().path().starts_with("/pkg/");
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if !headers.contains_key(CONTENT_SECURITY_POLICY) {
        headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(NOTHING));
    }
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    headers.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
    if !static_file {
        // Pages carry evidence and CSRF tokens; answers of the API and server functions are
        // read once. Neither belongs in a shared or a browser cache.
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}
