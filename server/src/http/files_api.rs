//! `/api/v1/definitions` and `/api/v1/adapters`: apply definition and adapter files and list
//! what is applied, for programs that deploy them the way they deploy code (docs/DESIGN.md §16).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use engine::definition::{Applied, ApplyError};
use engine::store::journal::Actor;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::client::{ApiClient, ApiError};

/// One applied definition.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct DefinitionBody {
    name: String,
    version: i32,
    /// `sha256:` of the file as applied.
    digest: String,
    applied_by: String,
    /// RFC 3339.
    applied_at: String,
}

/// What applying did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct AppliedBody {
    name: String,
    version: i32,
    /// `added`, `unchanged`, or with `dry_run` `would_add`.
    result: &'static str,
}

#[derive(Debug, Deserialize)]
pub(super) struct ApplyQuery {
    #[serde(default)]
    dry_run: bool,
    /// Store a definition whose steps name an adapter that is not registered yet.
    #[serde(default)]
    allow_missing_adapters: bool,
}

/// Who applies a file, when the token may configure: changing definitions and adapters is a
/// privilege apart from every role (docs/DESIGN.md §15), so an approver recovers steps but
/// re-points no API.
fn configurer(client: &ApiClient) -> Result<Actor<'_>, ApiError> {
    let grant = &client.0;
    if !grant.may_configure {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "token `{}` may not change configuration: definitions and adapters change only with a token made by `z29c token create NAME --configure`",
                grant.name
            ),
        ));
    }
    Ok(Actor::Api(&grant.name))
}

/// Refuses a definition that could call an adapter the token may not use: each step's adapter,
/// or each one a templated adapter may choose. (A file that does not parse is the apply's to
/// refuse, with its line.)
fn may_call_every_adapter(client: &ApiClient, body: &str) -> Result<(), ApiError> {
    if client.0.adapters.is_none() {
        return Ok(());
    }
    let Ok(file) = engine::definition::file::DefinitionFile::parse(body) else {
        return Ok(());
    };
    file.adapters_called()
        .into_iter()
        .try_for_each(|adapter| client.may_use(adapter, "apply a definition that calls"))
}

/// Every applied definition, by name and version.
#[utoipa::path(
    get,
    path = "/api/v1/definitions",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Applied definitions", body = [DefinitionBody]),
        (status = 401, description = "No or bad bearer token", body = super::client::ErrorBody),
        (status = 403, description = "The token is limited to some creation keys", body = super::client::ErrorBody),
    )
)]
pub(super) async fn list(
    client: ApiClient,
    State(pool): State<PgPool>,
) -> Result<Json<Vec<DefinitionBody>>, ApiError> {
    super::ops::unscoped(&client, "read configuration")?;
    let rows = engine::store::definition::all(&pool).await?;
    Ok(Json(
        rows.into_iter()
            .map(|r| DefinitionBody {
                name: r.name,
                version: r.version,
                digest: r.digest,
                applied_by: r.applied_by,
                applied_at: r.applied_at.to_rfc3339(),
            })
            .collect(),
    ))
}

/// Checks a definition file (the request body, YAML) and stores it under its name and
/// version, which must be the ones in the path. Applying the same file again changes nothing;
/// another file under a stored name and version is refused with the difference.
#[utoipa::path(
    put,
    path = "/api/v1/definitions/{name}/{version}",
    params(
        ("name" = String, Path, description = "The definition's name, as in the file"),
        ("version" = i32, Path, description = "Its version, as in the file"),
        ("dry_run" = Option<bool>, Query, description = "Check only; store nothing"),
        ("allow_missing_adapters" = Option<bool>, Query, description = "Store the definition even when a step names an adapter that is not registered yet"),
    ),
    request_body(content = String, content_type = "application/yaml", description = "The definition file"),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Stored", body = AppliedBody),
        (status = 200, description = "The same file was stored already, or a dry run", body = AppliedBody),
        (status = 401, description = "No or bad bearer token", body = super::client::ErrorBody),
        (status = 403, description = "The token may not configure", body = super::client::ErrorBody),
        (status = 409, description = "Another file is stored under this name and version (the error carries the diff)", body = super::client::ErrorBody),
        (status = 422, description = "The file is refused: the error names the line and what is wrong", body = super::client::ErrorBody),
    )
)]
pub(super) async fn put(
    client: ApiClient,
    State(pool): State<PgPool>,
    Path((name, version)): Path<(String, i32)>,
    Query(query): Query<ApplyQuery>,
    body: String,
) -> Result<Response, ApiError> {
    let by = configurer(&client)?;
    may_call_every_adapter(&client, &body)?;
    let (status, applied, result) = match engine::definition::apply_as(
        &pool,
        &body,
        &name,
        version,
        by,
        engine::definition::ApplyOptions {
            dry_run: query.dry_run,
            allow_missing_adapters: query.allow_missing_adapters,
        },
    )
    .await
    {
        Ok(Applied::Added { name, version }) if query.dry_run => {
            (StatusCode::OK, (name, version), "would_add")
        }
        Ok(Applied::Added { name, version }) => (StatusCode::CREATED, (name, version), "added"),
        Ok(Applied::Unchanged { name, version }) => (StatusCode::OK, (name, version), "unchanged"),
        Err(ApplyError::Sqlx(e)) => return Err(e.into()),
        Err(e @ ApplyError::Changed { .. }) => {
            return Err(ApiError::new(StatusCode::CONFLICT, e.to_string()));
        }
        Err(e) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                e.to_string(),
            ));
        }
    };
    let (name, version) = applied;
    Ok((
        status,
        Json(AppliedBody {
            name,
            version,
            result,
        }),
    )
        .into_response())
}

/// One registered adapter, and what verification proved of its current version.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct AdapterBody {
    name: String,
    version: i32,
    base_url: String,
    /// `idempotent`, `queryable` or `opaque`: what the verified claims make of it.
    kind: &'static str,
    capabilities: String,
    from_file: bool,
    /// Whether the current version passed verification: only then does it send anything.
    may_send: bool,
    verified_version: Option<i32>,
    verified_against: Option<String>,
    /// The contradiction production saw of a claim since, if it saw one.
    demoted: Option<String>,
    /// Each claim of the current version; only verified ones count.
    claims: Vec<ClaimBody>,
    /// An operator's hold, while it stands: nothing new is sent meanwhile.
    held: Option<super::ops::adapters::HoldView>,
    /// The outbound limits in force (`requests_per_second`, `in_flight`): its file's, with any
    /// override; `null` when unlimited.
    #[schema(value_type = Option<Object>)]
    limits: Option<engine::domain::Limits>,
    /// An approver's override of its file's limits, while it stands.
    #[schema(value_type = Option<Object>)]
    limit_override: Option<engine::store::pace::LimitOverride>,
}

/// One claim of an adapter's current version.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ClaimBody {
    /// `delivery`, `idempotency_key`, `lookup`, `withdrawal`, `deliver.outcomes[3]`, …
    claim: String,
    label: String,
    /// `verified`, `unverified` or `refuted`.
    trust: &'static str,
    /// What proved it, the contradiction, or why it stays unverified.
    evidence: String,
    /// The sandbox verification ran against (none for a contradiction seen in production).
    against: Option<String>,
}

impl From<&engine::store::adapter::ClaimRow> for ClaimBody {
    fn from(c: &engine::store::adapter::ClaimRow) -> Self {
        ClaimBody {
            claim: c.claim.id(),
            label: c.claim.label(),
            trust: c.trust.label(),
            evidence: c.evidence.clone(),
            against: c.against.clone(),
        }
    }
}

/// Every registered adapter.
#[utoipa::path(
    get,
    path = "/api/v1/adapters",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Registered adapters", body = [AdapterBody]),
        (status = 401, description = "No or bad bearer token", body = super::client::ErrorBody),
        (status = 403, description = "The token is limited to some creation keys", body = super::client::ErrorBody),
    )
)]
pub(super) async fn list_adapters(
    client: ApiClient,
    State(pool): State<PgPool>,
) -> Result<Json<Vec<AdapterBody>>, ApiError> {
    super::ops::unscoped(&client, "read configuration")?;
    let rows = engine::adapter::apply::listed(&pool).await?;
    let mut listed = Vec::with_capacity(rows.len());
    for row in rows {
        let a = row.adapter;
        listed.push(AdapterBody {
            held: row.hold.map(Into::into),
            limits: row.limits,
            limit_override: row.limit_override,
            kind: a.contract.kind().as_str(),
            capabilities: a.contract.capabilities_summary(),
            may_send: a.may_send(),
            name: a.name,
            version: a.contract_version,
            base_url: a.base_url,
            from_file: a.source.is_some(),
            verified_version: a.verified_version,
            verified_against: a.verified_against,
            demoted: a.demoted_reason,
            claims: row.claims.iter().map(ClaimBody::from).collect(),
        });
    }
    Ok(Json(listed))
}

/// Checks an adapter file (the request body, YAML; its secrets must be set where the server
/// runs) and stores it as the adapter's next version, unverified until
/// `z29c adapter verify NAME --sandbox URL` passes. The file's name must be the path's.
#[utoipa::path(
    put,
    path = "/api/v1/adapters/{name}",
    params(
        ("name" = String, Path, description = "The adapter's name, as in the file"),
        ("dry_run" = Option<bool>, Query, description = "Check only; store nothing"),
    ),
    request_body(content = String, content_type = "application/yaml", description = "The adapter file"),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Stored as a new version", body = AppliedBody),
        (status = 200, description = "The same file is the current version already, or a dry run", body = AppliedBody),
        (status = 401, description = "No or bad bearer token", body = super::client::ErrorBody),
        (status = 403, description = "The token may not configure", body = super::client::ErrorBody),
        (status = 422, description = "The file is refused: the error names the line and what is wrong", body = super::client::ErrorBody),
    )
)]
pub(super) async fn put_adapter(
    client: ApiClient,
    State(pool): State<PgPool>,
    Path(name): Path<String>,
    Query(query): Query<ApplyQuery>,
    body: String,
) -> Result<Response, ApiError> {
    use engine::adapter::apply::AdapterApplyError;
    use engine::store::adapter::FileStored;
    let by = configurer(&client)?;
    client.may_use(&name, "apply a file of")?;
    let named = engine::adapter::AdapterSpec::parse(&body)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    if named.name != name {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "the file defines adapter `{}`, not `{name}` as the path says",
                named.name
            ),
        ));
    }
    let stored = match engine::adapter::apply::apply(&pool, &body, by, query.dry_run).await {
        Ok((_, stored)) => stored,
        Err(AdapterApplyError::Sqlx(e)) => return Err(e.into()),
        Err(e) => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                e.to_string(),
            ));
        }
    };
    let (status, version, result) = match stored {
        FileStored::Unchanged { version } => (StatusCode::OK, version, "unchanged"),
        FileStored::Added { version } | FileStored::Changed { version } if query.dry_run => {
            (StatusCode::OK, version, "would_add")
        }
        FileStored::Added { version } | FileStored::Changed { version } => {
            (StatusCode::CREATED, version, "added")
        }
    };
    Ok((
        status,
        Json(AppliedBody {
            name,
            version,
            result,
        }),
    )
        .into_response())
}
