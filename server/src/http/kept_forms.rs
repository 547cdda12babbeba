//! Refused forms come back to their page whole, without JavaScript (docs/DESIGN.md §18).
//!
//! A browser posting a form without JavaScript accepts `text/html`, and Leptos answers it with a
//! redirect back to the page it came from, a refusal adding the error to that address
//! (`__path`, `__err`). Two things stood in the way of a person reading the refusal there: the
//! refusal's own status (a 401, a 422) replaced the redirect's, so browsers showed its JSON
//! instead of following `Location`; and the page had lost what the operator typed. This layer,
//! inside the session layer, sees each such post and its answer:
//! - the answer becomes a `303 See Other` to the page (its path and query only, never another
//!   origin), with no body;
//! - for a signed-in operator the form's fields, minus [`app::forms::NOT_KEPT`], and the refusal
//!   wait in the session for that page, which takes them once; the address carries no error;
//! - a visitor has no session to keep them in and gets none: the address keeps only the newest
//!   refusal and the username typed (a sign-in is the only form a visitor can post).

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION};
use axum::http::{HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use leptos::server_fn::error::ServerFnUrlError;
use tower_sessions::Session;

use app::error::ConsoleError;
use app::forms::{KeptForm, NOT_KEPT};

/// The largest form body read (a corrected input is the largest field a form has).
pub const MAX_FORM_BYTES: usize = 1024 * 1024;

/// The query parameters Leptos puts a refusal in.
const ERROR_PARAMETERS: [&str; 2] = ["__path", "__err"];

/// Keeps a refused plain form post for the page it returns to; everything else passes through.
pub async fn keep_refused_forms(request: Request, next: Next) -> Response {
    if !is_plain_form_post(&request) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_FORM_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            "This form is too large to send.",
        )
            .into_response();
    };
    let session = parts.extensions.get::<Session>().cloned();
    let fields: Vec<(String, String)> = form_urlencoded::parse(&bytes)
        .into_owned()
        .filter(|(name, _)| !NOT_KEPT.contains(&name.as_str()))
        .collect();
    let mut response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let Some(refused) = Refused::in_answer(&response) else {
        return response;
    };
    let kept = KeptForm {
        path: refused.path.clone(),
        refusal: Some(refused.error.clone()),
        fields,
    };
    let in_session = match &session {
        Some(session) => app::auth::api::keep_refused_form(session, &kept)
            .await
            .unwrap_or(false),
        None => false,
    };
    let location = if in_session {
        refused.page_alone()
    } else {
        refused.page_with_refusal(kept.field("username"))
    };
    *response.status_mut() = StatusCode::SEE_OTHER;
    *response.body_mut() = Body::empty();
    let headers = response.headers_mut();
    headers.remove(CONTENT_TYPE);
    headers.remove(CONTENT_LENGTH);
    match HeaderValue::from_str(&location) {
        Ok(location) => headers.insert(LOCATION, location),
        Err(_) => headers.insert(LOCATION, HeaderValue::from_static("/")),
    };
    response
}

/// A form a browser posted to a server function without JavaScript.
fn is_plain_form_post(request: &Request) -> bool {
    let accepts_html = request
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"));
    let form = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    request.method() == Method::POST
        && request.uri().path().starts_with("/fn/")
        && accepts_html
        && form
}

/// A refusal Leptos answered a plain form post with: the page to go back to, and why.
struct Refused {
    /// The page's path.
    page: String,
    /// The page's query parameters, without any refusal or username.
    query: Vec<(String, String)>,
    /// The server function refused (`__path`), and its refusal as Leptos encoded it (`__err`).
    path: String,
    encoded: String,
    error: ConsoleError,
}

impl Refused {
    /// The refusal in `response`'s redirect, if it is one. When the page's address already
    /// carried an earlier refusal, Leptos appends the new one after it: the last one counts.
    fn in_answer(response: &Response) -> Option<Self> {
        let location = response.headers().get(LOCATION)?.to_str().ok()?;
        let uri = location.parse::<Uri>().ok()?;
        let pairs: Vec<(String, String)> = form_urlencoded::parse(uri.query()?.as_bytes())
            .into_owned()
            .collect();
        let last = |name: &str| {
            pairs
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let (path, encoded) = (last("__path")?, last("__err")?);
        let error = ServerFnUrlError::<ConsoleError>::decode_err(&encoded);
        let query = pairs
            .into_iter()
            .filter(|(name, _)| !ERROR_PARAMETERS.contains(&name.as_str()) && name != "username")
            .collect();
        Some(Refused {
            page: uri.path().to_owned(),
            query,
            path,
            encoded,
            error,
        })
    }

    /// The page's address, without the refusal (it waits in the session).
    fn page_alone(&self) -> String {
        address(&self.page, &self.query)
    }

    /// The page's address with the refusal and the username typed, if any.
    fn page_with_refusal(&self, username: Option<&str>) -> String {
        let mut query = self.query.clone();
        if let Some(username) = username {
            query.push(("username".into(), username.to_owned()));
        }
        query.push(("__path".into(), self.path.clone()));
        query.push(("__err".into(), self.encoded.clone()));
        address(&self.page, &query)
    }
}

/// `path` with `query`, encoded.
fn address(path: &str, query: &[(String, String)]) -> String {
    if query.is_empty() {
        return path.to_owned();
    }
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(query)
        .finish();
    format!("{path}?{query}")
}
