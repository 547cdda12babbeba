//! [`DataAdapter`]: an adapter driven by an [`AdapterSpec`] alone. It shapes requests with
//! the file's templates, adds auth only as it sends, and classifies answers with the file's
//! outcome rules — an answer no rule recognizes is outcome unknown, always.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use super::answer::{Answer, BodyError, transport_error};
use super::secret::{Secret, SecretError};
use super::spec::{AdapterSpec, Auth, BaseUrl, Rule, Template};
use super::{Adapter, BoxFuture, LookupObservation, WithdrawalObservation};
use super::{PrepareError, PreparedRequest, Wire, WireBody};
use crate::domain::{
    Claim, InputDigest, Operation, RequestKey, SideEffectContract, TransportObservation,
};
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
    /// The rules reading an answer as "nothing happened" that verification proved; `None`
    /// trusts every rule (the contract suite reads answers as the file declares them).
    proven: Option<BTreeSet<Claim>>,
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
            BaseUrl::Env { env } => {
                super::policy::current()
                    .allows_env(env)
                    .map_err(SecretError::NotAllowed)?;
                let url = std::env::var(env)
                    .ok()
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| SecretError::BaseUrlNotSet(env.clone()))?;
                reachable(&url)?;
                url
            }
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
            // Every name resolves only to addresses the deployment allows.
            .dns_resolver(std::sync::Arc::new(super::policy::Resolver))
            // A redirect would send the body again elsewhere: one attempt, one request.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client builds");
        Ok(DataAdapter {
            base_url: base_url.trim_end_matches('/').to_owned(),
            spec,
            auth,
            contract,
            proven: None,
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

    /// The same adapter calling `base_url` instead: a sandbox verification runs against.
    pub fn with_base_url(mut self, base_url: &str) -> Self {
        self.base_url = base_url.trim_end_matches('/').to_owned();
        self
    }

    /// The same adapter under what verification proved (docs/DESIGN.md §5): the trusted
    /// contract, and the `verified` claims; an answer whose first matching rule reads it as
    /// `rejected` or `failed_before_effect` without that rule among them reads as unknown.
    pub fn with_trust(
        mut self,
        contract: SideEffectContract,
        verified: impl IntoIterator<Item = Claim>,
    ) -> Self {
        self.contract = contract;
        self.proven = Some(verified.into_iter().collect());
        self
    }

    /// Whether the withdrawal claim counts: proven, or the adapter is under verification (no
    /// trust given yet, as the suite runs it).
    fn withdrawal_proven(&self) -> bool {
        self.proven
            .as_ref()
            .is_none_or(|proven| proven.contains(&Claim::Withdrawal))
    }

    /// Whether rule `index` of `operation` may conclude that nothing happened. A delivery rule
    /// reading an answer as failed before effect was proven by the lookup finding nothing, so
    /// it counts only while the lookup does (refuted since, by a later run or in production,
    /// its witness proves nothing). Without a lookup, verification proves no such rule: one
    /// trusted then was registered as trusted (`apply::register_trusted`).
    fn rule_proven(&self, operation: Operation, index: usize) -> bool {
        let needs_no_witness = operation != Operation::Deliver
            || self.spec.lookup.is_none()
            || self
                .spec
                .deliver
                .outcomes
                .get(index)
                .is_none_or(|rule| rule.failed_before_effect.is_none());
        self.proven.as_ref().is_none_or(|proven| {
            proven.contains(&Claim::Rule { operation, index })
                && (needs_no_witness || proven.contains(&Claim::Lookup))
        })
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
        let path = without_dot_segments(text(&shape.path.0, context)?)?;
        let pairs = |map: &std::collections::BTreeMap<String, Template>| {
            map.iter()
                .map(|(name, value)| Ok((name.clone(), text(&value.0, context)?)))
                .collect::<Result<Vec<(String, String)>, PrepareError>>()
        };
        // A query parameter that renders to null (`{{ page.after | default(none) }}`) is left out.
        let query = shape
            .query
            .iter()
            .filter_map(|(name, value)| {
                match template::render_text(&value.0, context).map_err(refused) {
                    Ok(Value::Null) => None,
                    Ok(rendered) => Some(
                        scalar_text(rendered)
                            .map(|text| (name.clone(), text))
                            .ok_or_else(|| not_text(&value.0)),
                    ),
                    Err(e) => Some(Err(e)),
                }
            })
            .collect::<Result<Vec<(String, String)>, PrepareError>>()?;
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
            request: context.get("request").cloned().unwrap_or(Value::Null),
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

/// Whether the deployment's egress policy could let a request reach `url`'s host at all (an
/// address in the URL, a host name by name); its addresses are checked again at connect time.
pub(crate) fn reachable(url: &str) -> Result<(), SecretError> {
    let host = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .ok_or_else(|| SecretError::NotAllowed(format!("`{url}` is not a URL with a host")))?;
    super::policy::current()
        .may_reach(&host)
        .map_err(SecretError::NotAllowed)
}

/// `path`, unless a segment of it is `.` or `..` (written so or percent-encoded): `urlencode`
/// keeps dots, so an input of `..` would otherwise reach another resource than the file names.
fn without_dot_segments(path: String) -> Result<String, PrepareError> {
    let dots = path.split('/').any(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    });
    if dots {
        Err(PrepareError(format!(
            "the request's path `{}` has a `.` or `..` segment, which would reach another resource than the file names",
            crate::domain::words::displayable(&path)
        )))
    } else {
        Ok(path)
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
    scalar_text(rendered).ok_or_else(|| not_text(template))
}

fn not_text(template: &str) -> PrepareError {
    PrepareError(format!(
        "the adapter's template `{}` gave a list, a map or null where text belongs",
        crate::domain::words::displayable(template)
    ))
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

    fn limits(&self) -> crate::domain::Limits {
        self.spec.limits.unwrap_or_default()
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
            let (seen, _) = self.deliver_read(key, request).await;
            seen
        })
    }

    fn lookup<'a>(
        &'a self,
        key: &'a RequestKey,
        digest: &'a str,
        request: &'a Value,
    ) -> BoxFuture<'a, LookupObservation> {
        Box::pin(async move { self.look_up(key, digest, request, None).await.0 })
    }

    fn lookup_reads_request(&self) -> bool {
        self.spec.lookup.as_ref().is_some_and(|lookup| {
            std::iter::once(&lookup.path)
                .chain(lookup.query.values())
                .chain(lookup.headers.values())
                .any(|t| t.variables().iter().any(|v| v.starts_with("request")))
        })
    }

    fn withdraw<'a>(
        &'a self,
        key: &'a RequestKey,
        external_reference: &'a str,
    ) -> BoxFuture<'a, WithdrawalObservation> {
        Box::pin(async move {
            // Steps to withdraw were made while the claim counted; it may have stopped since
            // (refuted, or a new version not yet verified): then nothing is sent.
            if !self.withdrawal_proven() {
                return WithdrawalObservation::Transport(TransportObservation::AuthorityDenied {
                    reason: format!(
                        "the withdrawal claim of adapter `{}` is not verified for its current version",
                        self.spec.name
                    ),
                });
            }
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
            let proven = |index| self.rule_proven(Operation::Withdraw, index);
            classify::withdrawal(w, &answer, (key.as_str(), &digest), &proven)
        })
    }
}

impl DataAdapter {
    /// Sends a delivery and reads its answer: what it means under the rules verification
    /// proved, and the index of the rule that matched, if one did.
    pub async fn deliver_read(
        &self,
        key: &RequestKey,
        request: &PreparedRequest,
    ) -> (TransportObservation, Option<usize>) {
        let answer = match self.send(key, &request.wire, true).await {
            Ok(answer) => answer,
            Err(seen) => return (seen, None),
        };
        let digest = request.content_digest.to_string();
        let proven = |index| self.rule_proven(Operation::Deliver, index);
        classify::delivery(
            &self.spec.deliver.outcomes,
            &answer,
            (key.as_str(), &digest),
            &proven,
        )
    }
}

/// The index of the first rule of `rules` whose condition holds.
fn first_match(rules: &[Rule], context: &Value) -> Option<usize> {
    rules
        .iter()
        .position(|rule| template::holds(&rule.when.0, context))
}

/// What a capped read's failure means for a call that had `status`.
fn unread(status: u16, error: BodyError, deadline_ms: u64) -> TransportObservation {
    error.observed(status, deadline_ms)
}

/// A transport failure before any answer.
fn unsent(error: &reqwest::Error, deadline_ms: u64) -> TransportObservation {
    transport_error(error, deadline_ms)
}
