//! Reading an answer: the body, never past [`MAX_RESPONSE_BYTES`], and transport errors
//! classified by when they happened.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::domain::TransportObservation;

/// The most of a response body an adapter reads. The answers adapters expect are a few
/// kilobytes at most; a body past this is not one of them, and reading it could exhaust the
/// worker.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// How much of an unrecognized answer's body is kept as evidence.
pub const EXCERPT_CHARS: usize = 300;

/// Classifies a transport error by when it happened: a failed connect means the request never
/// left; anything later (timeout, reset, truncated body) leaves the outcome unknown.
pub(super) fn transport_error(error: &reqwest::Error, deadline_ms: u64) -> TransportObservation {
    if error.is_builder() {
        TransportObservation::NotSent {
            detail: error.to_string(),
        }
    } else if error.is_connect() {
        TransportObservation::ConnectFailed {
            detail: error.to_string(),
        }
    } else if error.is_timeout() {
        TransportObservation::DeadlineExceeded { deadline_ms }
    } else {
        TransportObservation::ConnectionLost {
            detail: error.to_string(),
        }
    }
}

/// Why a response body was not read to its end.
pub(super) enum BodyError {
    /// Larger than [`MAX_RESPONSE_BYTES`]: the rest was left unread.
    TooLarge,
    /// The transport failed while reading (timeout, reset, truncated).
    Transport(reqwest::Error),
}

impl BodyError {
    const TOO_LARGE: &str = "its body is larger than 1 MiB; the rest was not read";

    /// The observation of a call whose answer had `status` and this unreadable body.
    pub(super) fn observed(self, status: u16, deadline_ms: u64) -> TransportObservation {
        match self {
            BodyError::TooLarge => TransportObservation::UnreadableResponse {
                status,
                detail: Self::TOO_LARGE.to_owned(),
            },
            BodyError::Transport(error) => transport_error(&error, deadline_ms),
        }
    }
}

/// The body of `response`, read chunk by chunk and never past [`MAX_RESPONSE_BYTES`].
pub(super) async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, BodyError> {
    let cap = MAX_RESPONSE_BYTES;
    if response
        .content_length()
        .is_some_and(|declared| declared > cap as u64)
    {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if body.len() + chunk.len() > cap {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A complete answer, as outcome rules see it.
pub(super) struct Answer {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub bytes: Vec<u8>,
}

impl Answer {
    /// Reads `response` to its end (within the cap).
    pub(super) async fn read(response: reqwest::Response) -> Result<Answer, (u16, BodyError)> {
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    name.as_str().to_ascii_lowercase(),
                    value.to_str().ok()?.to_owned(),
                ))
            })
            .collect();
        let bytes = read_capped(response).await.map_err(|e| (status, e))?;
        Ok(Answer {
            status,
            headers,
            bytes,
        })
    }

    /// What rules and mappings read: `status`, `headers`, `body` (JSON or null), `key`,
    /// `digest`.
    pub(super) fn context(&self, key: &str, digest: &str) -> Value {
        let body = serde_json::from_slice::<Value>(&self.bytes).unwrap_or(Value::Null);
        json!({
            "status": self.status,
            "headers": self.headers,
            "body": body,
            "key": key,
            "digest": digest,
        })
    }

    /// At most [`EXCERPT_CHARS`] characters of the body, displayable.
    pub(super) fn excerpt(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        let cut: String = text.chars().take(EXCERPT_CHARS).collect();
        crate::domain::words::displayable(&cut)
    }
}
