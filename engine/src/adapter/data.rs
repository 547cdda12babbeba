//! [`DataAdapter`]: an adapter driven by an [`AdapterSpec`] alone. It shapes requests with
//! the file's templates, adds auth only as it sends, and classifies answers with the file's
//! outcome rules — an answer no rule recognizes is outcome unknown, always.

use std::time::Duration;

use serde_json::{Value, json};

use super::answer::{Answer, BodyError, transport_error};
use super::secret::{Secret, SecretError};
use super::spec::{AdapterSpec, Auth, BaseUrl, Rule, Template};
use super::{Adapter, BoxFuture, LookupObservation, WithdrawalObservation};
use super::{PrepareError, PreparedRequest, Wire, WireBody};
use crate::domain::{InputDigest, RequestKey, SideEffectContract, TransportObservation};
use crate::template::{self, TemplateError};

mod classify;
mod send;

/// Auth with its secrets resolved.
#[derive(Debug, Clone)]
enum ResolvedAuth {
    Bearer(Secret),
    Basic {
        username: Secret,
        password: Secret,
    },
    Header {
        name: String,
        value: Secret,
    },
    HmacSha256 {
        header: String,
        prefix: String,
        secret: Secret,
    },
}

/// An adapter built from an adapter file.
#[derive(Debug, Clone)]
pub struct DataAdapter {
    spec: AdapterSpec,
    base_url: String,
    auth: Option<ResolvedAuth>,
    contract: SideEffectContract,
    client: reqwest::Client,
}

/// The templates of one request, whichever operation it is.
struct RequestShape<'a> {
    method: &'a str,
    path: &'a Template,
    query: &'a std::collections::BTreeMap<String, Template>,
    headers: &'a std::collections::BTreeMap<String, Template>,
    json: Option<&'a Value>,
    form: Option<&'a std::collections::BTreeMap<String, Value>>,
}

impl DataAdapter {
    /// The adapter `spec` describes, with its secrets and base URL resolved.
    pub fn new(spec: AdapterSpec) -> Result<DataAdapter, SecretError> {
        let base_url = match &spec.base_url {
            BaseUrl::Literal(url) => url.clone(),
            BaseUrl::Env { env } => std::env::var(env)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| SecretError::BaseUrlNotSet(env.clone()))?,
        };
        let auth = match &spec.auth {
            None => None,
            Some(Auth::Bearer(secret)) => Some(ResolvedAuth::Bearer(secret.resolve()?)),
            Some(Auth::Basic { username, password }) => Some(ResolvedAuth::Basic {
                username: username.resolve()?,
                password: password.resolve()?,
            }),
            Some(Auth::Header { name, value }) => Some(ResolvedAuth::Header {
                name: name.clone(),
                value: value.resolve()?,
            }),
            Some(Auth::HmacSha256 {
                header,
                prefix,
                secret,
            }) => Some(ResolvedAuth::HmacSha256 {
                header: header.clone(),
                prefix: prefix.clone(),
                secret: secret.resolve()?,
            }),
        };
        let contract = spec.contract();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(contract.deadline_ms.min(5_000)))
            .pool_idle_timeout(Duration::from_secs(30))
            // A redirect would send the body again elsewhere: one attempt, one request.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client builds");
        Ok(DataAdapter {
            base_url: base_url.trim_end_matches('/').to_owned(),
            spec,
            auth,
            contract,
            client,
        })
    }

    /// The file this adapter was built from.
    pub fn spec(&self) -> &AdapterSpec {
        &self.spec
    }

    /// The base URL the adapter calls, resolved.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The same adapter calling `base_url` instead: a sandbox its contract suite runs against.
    pub fn with_base_url(mut self, base_url: &str) -> Self {
        self.base_url = base_url.trim_end_matches('/').to_owned();
        self
    }

    /// The same adapter under the contract the engine trusts it with now: the declared one
    /// once its version is verified, else the declared one with unknown outcomes reviewed.
    pub fn with_contract(mut self, contract: SideEffectContract) -> Self {
        self.contract = contract;
        self
    }

    fn deadline(&self) -> Duration {
        Duration::from_millis(self.contract.deadline_ms)
    }

    /// Renders `shape` in `context` into a prepared request carrying `content_digest`.
    fn render(
        &self,
        shape: &RequestShape<'_>,
        context: &Value,
        content_digest: InputDigest,
    ) -> Result<PreparedRequest, PrepareError> {
        let path = text(&shape.path.0, context)?;
        let pairs = |map: &std::collections::BTreeMap<String, Template>| {
            map.iter()
                .map(|(name, value)| Ok((name.clone(), text(&value.0, context)?)))
                .collect::<Result<Vec<(String, String)>, PrepareError>>()
        };
        let query = pairs(shape.query)?;
        let headers = pairs(shape.headers)?;
        let body = match (shape.json, shape.form) {
            (Some(tree), _) => {
                WireBody::Json(template::render_tree(tree, context).map_err(refused)?)
            }
            // A field that renders to null (`{{ request.note | default(none) }}`) is left out.
            (None, Some(form)) => WireBody::Form(
                form.iter()
                    .map(|(name, value)| {
                        match template::render_tree(value, context).map_err(refused)? {
                            Value::Null => Ok(None),
                            rendered => Ok(Some((name.clone(), form_value(name, rendered)?))),
                        }
                    })
                    .filter_map(Result::transpose)
                    .collect::<Result<_, PrepareError>>()?,
            ),
            (None, None) => WireBody::None,
        };
        let summary = json!({
            "method": shape.method,
            "path": path,
            "query": query.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "headers": headers.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "body": match &body {
                WireBody::None => Value::Null,
                WireBody::Json(tree) => json!({ "json": tree }),
                WireBody::Form(pairs) => json!({
                    "form": pairs.iter().cloned().collect::<std::collections::BTreeMap<_, _>>()
                }),
            },
            "digest": content_digest,
        });
        Ok(PreparedRequest {
            request_digest: InputDigest::of_json(&summary),
            content_digest,
            wire: Wire {
                method: shape.method.to_ascii_uppercase(),
                path,
                query,
                headers,
                body,
            },
            summary,
        })
    }

    fn deliver_shape(&self) -> RequestShape<'_> {
        let d = &self.spec.deliver;
        RequestShape {
            method: &d.method,
            path: &d.path,
            query: &d.query,
            headers: &d.headers,
            json: d.json.as_ref(),
            form: d.form.as_ref(),
        }
    }
}

fn refused(error: TemplateError) -> PrepareError {
    PrepareError(format!(
        "the adapter's request could not be rendered: {error}"
    ))
}

/// A template rendered to text: strings as they are, numbers and booleans as JSON text.
fn text(template: &str, context: &Value) -> Result<String, PrepareError> {
    let rendered = template::render_text(template, context).map_err(refused)?;
    scalar_text(rendered).ok_or_else(|| {
        PrepareError(format!(
            "the adapter's template `{}` gave a list, a map or null where text belongs",
            crate::domain::words::displayable(template)
        ))
    })
}

fn scalar_text(value: Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn form_value(name: &str, value: Value) -> Result<String, PrepareError> {
    scalar_text(value).ok_or_else(|| {
        PrepareError(format!(
            "the form field `{}` rendered to a list or a map; form values are text, numbers or booleans",
            crate::domain::words::displayable(name)
        ))
    })
}

impl Adapter for DataAdapter {
    fn contract(&self) -> &SideEffectContract {
        &self.contract
    }

    fn probe(&self) -> Option<Value> {
        self.spec.probe().cloned()
    }

    fn prepare(
        &self,
        key: &RequestKey,
        request: &Value,
        content_digest: &InputDigest,
    ) -> Result<PreparedRequest, PrepareError> {
        let context = json!({
            "request": request,
            "key": key.as_str(),
            "digest": content_digest,
        });
        self.render(&self.deliver_shape(), &context, content_digest.clone())
    }

    fn prepare_withdrawal(
        &self,
        key: &RequestKey,
        external_reference: &str,
    ) -> Result<PreparedRequest, PrepareError> {
        let Some(w) = &self.spec.withdraw else {
            return Err(PrepareError(format!(
                "adapter `{}` declares no withdrawal",
                self.spec.name
            )));
        };
        let content_digest = InputDigest::of_json(&json!({ "withdraw": external_reference }));
        let context = json!({
            "key": key.as_str(),
            "reference": external_reference,
            "digest": content_digest,
        });
        let shape = RequestShape {
            method: &w.method,
            path: &w.path,
            query: &w.query,
            headers: &w.headers,
            json: w.json.as_ref(),
            form: w.form.as_ref(),
        };
        self.render(&shape, &context, content_digest)
    }

    fn deliver<'a>(
        &'a self,
        key: &'a RequestKey,
        request: &'a PreparedRequest,
    ) -> BoxFuture<'a, TransportObservation> {
        Box::pin(async move {
            let answer = match self.send(key, &request.wire, true).await {
                Ok(answer) => answer,
                Err(seen) => return seen,
            };
            let digest = request.content_digest.to_string();
            classify::delivery(&self.spec.deliver.outcomes, &answer, key.as_str(), &digest)
        })
    }

    fn lookup<'a>(
        &'a self,
        key: &'a RequestKey,
        digest: &'a str,
    ) -> BoxFuture<'a, LookupObservation> {
        Box::pin(async move { self.look_up(key, digest).await })
    }

    fn withdraw<'a>(
        &'a self,
        key: &'a RequestKey,
        external_reference: &'a str,
    ) -> BoxFuture<'a, WithdrawalObservation> {
        Box::pin(async move {
            let Some(w) = &self.spec.withdraw else {
                return WithdrawalObservation::Transport(TransportObservation::AuthorityDenied {
                    reason: format!("adapter `{}` declares no withdrawal", self.spec.name),
                });
            };
            let prepared = match self.prepare_withdrawal(key, external_reference) {
                Ok(prepared) => prepared,
                Err(e) => {
                    return WithdrawalObservation::Transport(
                        TransportObservation::AuthorityDenied { reason: e.0 },
                    );
                }
            };
            let answer = match self.send(key, &prepared.wire, true).await {
                Ok(answer) => answer,
                Err(seen) => return WithdrawalObservation::Transport(seen),
            };
            let digest = prepared.content_digest.to_string();
            classify::withdrawal(w, &answer, key.as_str(), &digest)
        })
    }
}

/// The rules of `outcomes` in order: the first whose condition holds.
fn first_match<'r>(rules: &'r [Rule], context: &Value) -> Option<&'r Rule> {
    rules
        .iter()
        .find(|rule| template::holds(&rule.when.0, context))
}

/// What a capped read's failure means for a call that had `status`.
fn unread(status: u16, error: BodyError, deadline_ms: u64) -> TransportObservation {
    error.observed(status, deadline_ms)
}

/// A transport failure before any answer.
fn unsent(error: &reqwest::Error, deadline_ms: u64) -> TransportObservation {
    transport_error(error, deadline_ms)
}
