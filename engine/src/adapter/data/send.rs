//! Sending a rendered request: the exact body bytes, the idempotency header, and auth added
//! only here — so no secret reaches a summary, a digest or an observation.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use super::{Answer, DataAdapter, ResolvedAuth, unread, unsent};
use crate::adapter::spec::{Lookup, Pages};
use crate::adapter::{LookupObservation, PreparedRequest, Wire, WireBody};
use crate::domain::{InputDigest, RequestKey, TransportObservation};

/// The exact bytes of a body and its content type: RFC 8785 canonical JSON, or form pairs in
/// their (sorted) order, `application/x-www-form-urlencoded`.
pub fn body_bytes(body: &WireBody) -> Option<(Vec<u8>, &'static str)> {
    match body {
        WireBody::None => None,
        WireBody::Json(tree) => Some((
            crate::domain::identity::canonical_json(tree),
            "application/json",
        )),
        WireBody::Form(pairs) => {
            let encoded = pairs
                .iter()
                .map(|(name, value)| format!("{}={}", form_encode(name), form_encode(value)))
                .collect::<Vec<_>>()
                .join("&");
            Some((encoded.into_bytes(), "application/x-www-form-urlencoded"))
        }
    }
}

/// `application/x-www-form-urlencoded` encoding of one name or value (WHATWG URL).
fn form_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

impl DataAdapter {
    /// Sends `wire` once, with the idempotency header (`key`) when declared and `idempotent`,
    /// and auth; returns the complete answer or what the transport saw instead.
    pub(super) async fn send(
        &self,
        key: &RequestKey,
        wire: &Wire,
        idempotent: bool,
    ) -> Result<Answer, TransportObservation> {
        let deadline_ms = self.contract.deadline_ms;
        match self.start(key, wire, idempotent)?.send().await {
            Err(error) => Err(unsent(&error, deadline_ms)),
            Ok(response) => Answer::read(response)
                .await
                .map_err(|(status, error)| unread(status, error, deadline_ms)),
        }
    }

    /// The request `wire` describes, ready to send: the idempotency header (`key`) when
    /// declared and `idempotent`, the trace context, the exact body bytes, and auth.
    fn start(
        &self,
        key: &RequestKey,
        wire: &Wire,
        idempotent: bool,
    ) -> Result<reqwest::RequestBuilder, TransportObservation> {
        let method = reqwest::Method::from_bytes(wire.method.as_bytes()).map_err(|_| {
            TransportObservation::AuthorityDenied {
                reason: format!("`{}` is not an HTTP method", wire.method),
            }
        })?;
        // An address written in the URL is never resolved, so the resolver cannot refuse it.
        super::reachable(&self.base_url).map_err(|e| TransportObservation::NotSent {
            detail: e.to_string(),
        })?;
        let mut call = self
            .client
            .request(method, format!("{}{}", self.base_url, wire.path))
            .timeout(self.deadline());
        if !wire.query.is_empty() {
            call = call.query(&wire.query);
        }
        for (name, value) in &wire.headers {
            call = call.header(name, value);
        }
        if let Some(idempotency) = &self.spec.idempotency
            && idempotent
            && !wire
                .headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case(&idempotency.header))
        {
            call = call.header(&idempotency.header, key.as_str());
        }
        if let Some(traceparent) = crate::adapter::traceparent() {
            call = call.header("traceparent", traceparent);
        }
        let bytes = body_bytes(&wire.body);
        call = self.authenticate(call, bytes.as_ref().map_or(&[][..], |(b, _)| b));
        if let Some((bytes, content_type)) = bytes {
            call = call
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(bytes);
        }
        Ok(call)
    }

    /// Adds auth to `call`; an HMAC signs exactly `body`, the bytes sent.
    fn authenticate(&self, call: reqwest::RequestBuilder, body: &[u8]) -> reqwest::RequestBuilder {
        match &self.auth {
            None => call,
            Some(ResolvedAuth::Bearer(secret)) => call.bearer_auth(secret.expose()),
            Some(ResolvedAuth::Basic { username, password }) => {
                call.basic_auth(username.expose(), Some(password.expose()))
            }
            Some(ResolvedAuth::Header { name, value }) => call.header(name, value.expose()),
            Some(ResolvedAuth::HmacSha256 {
                header,
                prefix,
                secret,
            }) => {
                let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
                    .expect("HMAC takes a key of any length");
                mac.update(body);
                let signature = hex::encode(mac.finalize().into_bytes());
                call.header(header, format!("{prefix}{signature}"))
            }
        }
    }

    /// Asks the destination about `key`, comparing what it holds with `digest`; `request` is
    /// the step's request (what the lookup's templates read). A lookup with `pages` walks the
    /// list page by page, `page_size` a page (the file's `pages.size` when `None`), until the
    /// cursor runs out; returns what it saw, how many pages it read and how many items they
    /// held.
    pub async fn look_up(
        &self,
        key: &RequestKey,
        digest: &str,
        request: &Value,
        page_size: Option<u32>,
    ) -> (LookupObservation, u32, usize) {
        let Some(lookup) = &self.spec.lookup else {
            return (LookupObservation::NotSupported, 0, 0);
        };
        let deadline =
            Duration::from_millis(lookup.deadline_ms.unwrap_or(self.contract.deadline_ms));
        let walk = self.walk(lookup, key, digest, request, page_size);
        match tokio::time::timeout(deadline, walk).await {
            Ok(seen) => seen,
            Err(_) => (
                LookupObservation::Unavailable {
                    detail: format!(
                        "the lookup took longer than its {} ms deadline",
                        deadline.as_millis()
                    ),
                },
                0,
                0,
            ),
        }
    }

    async fn walk(
        &self,
        lookup: &Lookup,
        key: &RequestKey,
        digest: &str,
        request: &Value,
        page_size: Option<u32>,
    ) -> (LookupObservation, u32, usize) {
        let shape = super::RequestShape {
            method: &lookup.method,
            path: &lookup.path,
            query: &lookup.query,
            headers: &lookup.headers,
            json: None,
            form: None,
        };
        let size = page_size.or(lookup.pages.as_ref().map(|p| p.size));
        let most = lookup.pages.as_ref().map_or(1, |p| p.max.max(1));
        let mut items: Vec<Value> = Vec::new();
        let mut after = Value::Null;
        for number in 1..=most {
            let context = json!({
                "key": key.as_str(), "digest": digest, "request": request,
                "page": { "number": number, "size": size, "after": after },
            });
            let prepared = match self.render(&shape, &context, InputDigest::of_bytes(b"lookup")) {
                Ok(prepared) => prepared,
                Err(e) => {
                    return (
                        LookupObservation::Unavailable { detail: e.0 },
                        number - 1,
                        items.len(),
                    );
                }
            };
            let answer = match self.send(key, &prepared.wire, false).await {
                Ok(answer) => answer,
                Err(seen) => return (unavailable(seen), number - 1, items.len()),
            };
            let mut context = answer.context(key.as_str(), digest);
            context["request"] = request.clone();
            let Some(pages) = &lookup.pages else {
                return (
                    super::classify::lookup(lookup, answer.status, context, digest),
                    1,
                    0,
                );
            };
            match page(pages, &context) {
                Err(detail) => {
                    let detail =
                        format!("page {number} of the lookup ({}): {detail}", answer.status);
                    return (
                        LookupObservation::Unavailable { detail },
                        number,
                        items.len(),
                    );
                }
                Ok((more, next)) => {
                    items.extend(more);
                    if next.is_null() {
                        let count = items.len();
                        context["items"] = Value::Array(items);
                        let seen = super::classify::lookup(lookup, answer.status, context, digest);
                        return (seen, number, count);
                    }
                    after = next;
                }
            }
        }
        let detail = format!("the lookup walked {most} pages without reaching the end of the list");
        (LookupObservation::Unavailable { detail }, most, items.len())
    }

    /// Sends a delivery and closes the connection without reading its answer: once the
    /// destination has begun to answer (so it has taken the request), after waiting `hold`
    /// more. What verification makes of a lost answer. `false` when no answer began.
    pub async fn deliver_unread(
        &self,
        key: &RequestKey,
        request: &PreparedRequest,
        hold: Duration,
    ) -> bool {
        let Ok(call) = self.start(key, &request.wire, true) else {
            return false;
        };
        match call.send().await {
            Ok(response) => {
                tokio::time::sleep(hold).await;
                drop(response);
                true
            }
            Err(_) => false,
        }
    }
}

/// What one page of a walk adds to the items, and the cursor of the next (null: the last).
fn page(pages: &Pages, context: &Value) -> Result<(Vec<Value>, Value), String> {
    let more = match crate::template::eval(&pages.items.0, context).map_err(|e| e.to_string())? {
        Value::Array(items) => items,
        _ => return Err(format!("`{}` is not a list", pages.items.0)),
    };
    let next = crate::template::eval(&pages.next.0, context)
        .or_else(|e| {
            if e.detail == "it names nothing" {
                Ok(Value::Null)
            } else {
                Err(e)
            }
        })
        .map_err(|e| e.to_string())?;
    Ok((more, next))
}

/// A lookup whose request failed in transport: unavailable, saying what was seen.
fn unavailable(seen: TransportObservation) -> LookupObservation {
    match seen {
        TransportObservation::UnreadableResponse { status, detail } => {
            LookupObservation::Unavailable {
                detail: format!("the lookup's answer ({status}) could not be read: {detail}"),
            }
        }
        seen => LookupObservation::Unavailable {
            detail: seen.describe(),
        },
    }
}
