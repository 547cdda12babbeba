//! The HTTP adapter: speaks the destination protocol (`destinations/PROTOCOL.md`), so any
//! service implementing it can sit behind Z29C with the contract it honours.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Adapter, BoxFuture, LookupObservation, WithdrawalObservation};
use super::{PrepareError, PreparedRequest, Wire, WireBody};
use crate::domain::identity::percent_encode;
use crate::domain::{InputDigest, RequestKey, SideEffectContract, TransportObservation};

/// An adapter reaching one destination over HTTP.
#[derive(Debug, Clone)]
pub struct HttpAdapter {
    base_url: String,
    contract: SideEffectContract,
    client: reqwest::Client,
}

impl HttpAdapter {
    /// An adapter for the service at `base_url` honouring `contract`.
    pub fn new(base_url: &str, contract: SideEffectContract) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(contract.deadline_ms.min(5_000)))
            .pool_idle_timeout(Duration::from_secs(30))
            // A redirect would send the body again elsewhere: one attempt, one request.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client builds");
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            contract,
            client,
        }
    }

    fn deadline(&self) -> Duration {
        Duration::from_millis(self.contract.deadline_ms)
    }
}

#[derive(Deserialize)]
struct Accepted {
    external_reference: String,
    #[serde(default)]
    replayed: bool,
}

#[derive(Deserialize)]
struct Refusal {
    code: String,
    #[serde(default = "accepted_unknown")]
    accepted: Option<bool>,
}

fn accepted_unknown() -> Option<bool> {
    None
}

#[derive(Deserialize)]
struct Lookup {
    status: String,
    external_reference: Option<String>,
    digest: Option<String>,
    #[serde(default)]
    all: Vec<String>,
}

#[derive(Deserialize)]
struct Withdrawn {
    withdrawal_reference: String,
    #[serde(default)]
    limits: String,
}

/// Classifies a transport error by when it happened: a failed connect means the request never
/// left; anything later (timeout, reset, truncated body) leaves the outcome unknown.
fn transport_error(error: &reqwest::Error, deadline_ms: u64) -> TransportObservation {
    if error.is_connect() {
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

/// The most of a response body the adapter reads. The protocol's answers are a few hundred
/// bytes; a body past this is not one of them, and reading it could exhaust the worker.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Why a response body was not read to its end.
enum BodyError {
    /// Larger than [`MAX_RESPONSE_BYTES`]: the rest was left unread.
    TooLarge,
    /// The transport failed while reading (timeout, reset, truncated).
    Transport(reqwest::Error),
}

impl BodyError {
    const TOO_LARGE: &str = "its body is larger than 1 MiB; the rest was not read";

    /// The observation of a call whose answer had `status` and this unreadable body.
    fn observed(self, status: u16, deadline_ms: u64) -> TransportObservation {
        match self {
            BodyError::TooLarge => TransportObservation::UnreadableResponse {
                status,
                detail: Self::TOO_LARGE.to_owned(),
            },
            BodyError::Transport(error) => transport_error(&error, deadline_ms),
        }
    }

    fn detail(&self) -> String {
        match self {
            BodyError::TooLarge => Self::TOO_LARGE.to_owned(),
            BodyError::Transport(error) => error.to_string(),
        }
    }
}

/// The body of `response`, read chunk by chunk and never past [`MAX_RESPONSE_BYTES`].
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, BodyError> {
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

async fn classify(
    response: Result<reqwest::Response, reqwest::Error>,
    deadline_ms: u64,
) -> TransportObservation {
    let response = match response {
        Ok(response) => response,
        Err(error) => return transport_error(&error, deadline_ms),
    };
    let status = response.status().as_u16();
    let bytes = match read_capped(response).await {
        Ok(bytes) => bytes,
        Err(error) => return error.observed(status, deadline_ms),
    };
    match status {
        200 | 201 => match serde_json::from_slice::<Accepted>(&bytes) {
            Ok(a) => TransportObservation::Accepted {
                status,
                external_reference: a.external_reference,
                replayed: a.replayed,
            },
            Err(e) => TransportObservation::UnreadableResponse {
                status,
                detail: e.to_string(),
            },
        },
        _ => match serde_json::from_slice::<Refusal>(&bytes) {
            // Only the protocol's explicit promise makes a refusal "nothing committed".
            Ok(Refusal {
                code,
                accepted: Some(false),
            }) if status == 503 || status == 429 => {
                TransportObservation::NotAccepted { status, code }
            }
            Ok(Refusal {
                code,
                accepted: Some(false),
            }) if (400..500).contains(&status) => TransportObservation::Rejected { status, code },
            _ => TransportObservation::UnexpectedStatus { status },
        },
    }
}

/// A protocol request: a JSON body POSTed to `path`, recorded as the body itself.
fn protocol_request(path: String, body: Value, content_digest: InputDigest) -> PreparedRequest {
    PreparedRequest {
        request_digest: InputDigest::of_json(&body),
        content_digest,
        wire: Wire {
            method: "POST".to_owned(),
            path,
            query: Vec::new(),
            headers: Vec::new(),
            body: WireBody::Json(body.clone()),
        },
        summary: body,
    }
}

impl Adapter for HttpAdapter {
    fn contract(&self) -> &SideEffectContract {
        &self.contract
    }

    fn prepare(
        &self,
        key: &RequestKey,
        request: &serde_json::Value,
        content_digest: &InputDigest,
    ) -> Result<PreparedRequest, PrepareError> {
        let body = json!({
            "client_reference": key.as_str(),
            "digest": content_digest,
            "recipient": request["recipient"],
            "summary": request["summary"],
        });
        Ok(protocol_request(
            "/deliveries".to_owned(),
            body,
            content_digest.clone(),
        ))
    }

    fn prepare_withdrawal(
        &self,
        key: &RequestKey,
        external_reference: &str,
    ) -> Result<PreparedRequest, PrepareError> {
        let content_digest = InputDigest::of_json(&json!({ "withdraw": external_reference }));
        let body = json!({
            "client_reference": key.as_str(),
            "digest": content_digest,
            "withdraw": external_reference,
            "summary": format!("Withdraw delivery {external_reference}"),
        });
        let path = format!(
            "/deliveries/{}/withdrawal",
            percent_encode(external_reference)
        );
        Ok(protocol_request(path, body, content_digest))
    }

    fn deliver<'a>(
        &'a self,
        key: &'a RequestKey,
        request: &'a PreparedRequest,
    ) -> BoxFuture<'a, TransportObservation> {
        Box::pin(async move {
            let mut call = self
                .client
                .post(format!("{}/deliveries", self.base_url))
                .timeout(self.deadline())
                .json(&request.summary);
            if self.contract.accepts_idempotency_key {
                call = call.header("Idempotency-Key", key.as_str());
            }
            classify(call.send().await, self.contract.deadline_ms).await
        })
    }

    fn lookup<'a>(
        &'a self,
        key: &'a RequestKey,
        digest: &'a str,
    ) -> BoxFuture<'a, LookupObservation> {
        Box::pin(async move {
            if !self.contract.query_by_client_reference {
                return LookupObservation::NotSupported;
            }
            let response = self
                .client
                .get(format!(
                    "{}/deliveries/by-reference/{}",
                    self.base_url,
                    percent_encode(key.as_str())
                ))
                .query(&[("digest", digest)])
                .timeout(self.deadline())
                .send()
                .await;
            let response = match response {
                Ok(r) => r,
                Err(e) => {
                    return LookupObservation::Unavailable {
                        detail: e.to_string(),
                    };
                }
            };
            let status = response.status().as_u16();
            let parsed = match read_capped(response).await {
                Ok(body) => serde_json::from_slice::<Lookup>(&body).map_err(|e| e.to_string()),
                Err(error) => {
                    return LookupObservation::Unavailable {
                        detail: format!(
                            "the lookup's answer ({status}) could not be read: {}",
                            error.detail()
                        ),
                    };
                }
            };
            match (status, parsed) {
                (200, Ok(l)) => match (l.status.as_str(), l.external_reference, l.digest) {
                    ("found", Some(external_reference), Some(digest)) => LookupObservation::Found {
                        all: if l.all.is_empty() {
                            vec![external_reference.clone()]
                        } else {
                            l.all
                        },
                        external_reference,
                        digest,
                    },
                    ("found_with_conflicting_digest", Some(external_reference), Some(digest)) => {
                        LookupObservation::FoundWithConflictingDigest {
                            external_reference,
                            digest,
                        }
                    }
                    ("not_found", _, _) => LookupObservation::NotFound,
                    ("processing", _, _) => LookupObservation::Processing,
                    (other, _, _) => LookupObservation::Unavailable {
                        detail: format!("unexpected lookup status `{other}`"),
                    },
                },
                (status, _) => LookupObservation::Unavailable {
                    detail: format!("lookup answered {status}"),
                },
            }
        })
    }

    fn withdraw<'a>(
        &'a self,
        key: &'a RequestKey,
        external_reference: &'a str,
    ) -> BoxFuture<'a, WithdrawalObservation> {
        Box::pin(async move {
            let response = self
                .client
                .post(format!(
                    "{}/deliveries/{}/withdrawal",
                    self.base_url,
                    percent_encode(external_reference)
                ))
                .header("Idempotency-Key", key.as_str())
                .timeout(self.deadline())
                .send()
                .await;
            let response = match response {
                Ok(r) => r,
                Err(e) => {
                    return WithdrawalObservation::Transport(transport_error(
                        &e,
                        self.contract.deadline_ms,
                    ));
                }
            };
            let status = response.status().as_u16();
            if status == 200 || status == 201 {
                let body = match read_capped(response).await {
                    Ok(body) => body,
                    Err(error) => {
                        return WithdrawalObservation::Transport(
                            error.observed(status, self.contract.deadline_ms),
                        );
                    }
                };
                match serde_json::from_slice::<Withdrawn>(&body) {
                    Ok(w) => WithdrawalObservation::Withdrawn {
                        withdrawal_reference: w.withdrawal_reference,
                        limits: w.limits,
                    },
                    Err(e) => {
                        WithdrawalObservation::Transport(TransportObservation::UnreadableResponse {
                            status,
                            detail: e.to_string(),
                        })
                    }
                }
            } else {
                WithdrawalObservation::Transport(TransportObservation::UnexpectedStatus { status })
            }
        })
    }
}
