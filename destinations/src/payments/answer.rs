//! An answer as bytes: what is sent, and what an idempotency key saves and replays.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

use super::wire::IDEMPOTENT_REPLAYED_HEADER;

/// A status and a JSON body, kept as the exact bytes sent.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: String,
}

impl Answer {
    pub fn json(status: StatusCode, body: &impl Serialize) -> Self {
        Answer {
            status,
            body: serde_json::to_string(body).expect("an answer serialises"),
        }
    }

    /// The same bytes again, marked `Idempotent-Replayed: true`.
    pub fn replayed(self) -> Response {
        let mut response = self.into_response();
        response
            .headers_mut()
            .insert(IDEMPOTENT_REPLAYED_HEADER, HeaderValue::from_static("true"));
        response
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        (
            self.status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            self.body,
        )
            .into_response()
    }
}
