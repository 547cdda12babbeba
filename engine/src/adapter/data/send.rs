//! Sending a rendered request: the exact body bytes, the idempotency header, and auth added
//! only here — so no secret reaches a summary, a digest or an observation.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{Answer, DataAdapter, ResolvedAuth, unread, unsent};
use crate::adapter::{LookupObservation, Wire, WireBody};
use crate::domain::{RequestKey, TransportObservation};

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
        let method = reqwest::Method::from_bytes(wire.method.as_bytes()).map_err(|_| {
            TransportObservation::AuthorityDenied {
                reason: format!("`{}` is not an HTTP method", wire.method),
            }
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
        match call.send().await {
            Err(error) => Err(unsent(&error, deadline_ms)),
            Ok(response) => Answer::read(response)
                .await
                .map_err(|(status, error)| unread(status, error, deadline_ms)),
        }
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

    /// Asks the destination about `key`, comparing what it holds with `digest`.
    pub(super) async fn look_up(&self, key: &RequestKey, digest: &str) -> LookupObservation {
        let Some(lookup) = &self.spec.lookup else {
            return LookupObservation::NotSupported;
        };
        let context = serde_json::json!({ "key": key.as_str(), "digest": digest });
        let shape = super::RequestShape {
            method: &lookup.method,
            path: &lookup.path,
            query: &lookup.query,
            headers: &lookup.headers,
            json: None,
            form: None,
        };
        let digest_value = crate::domain::InputDigest::of_bytes(b"lookup");
        let prepared = match self.render(&shape, &context, digest_value) {
            Ok(prepared) => prepared,
            Err(e) => return LookupObservation::Unavailable { detail: e.0 },
        };
        match self.send(key, &prepared.wire, false).await {
            Ok(answer) => super::classify::lookup(lookup, &answer, key.as_str(), digest),
            Err(TransportObservation::UnreadableResponse { status, detail }) => {
                LookupObservation::Unavailable {
                    detail: format!("the lookup's answer ({status}) could not be read: {detail}"),
                }
            }
            Err(seen) => LookupObservation::Unavailable {
                detail: seen.describe(),
            },
        }
    }
}
