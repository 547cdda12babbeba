//! `GET /api/v1/steps/{id}` (the evidence, with the step's version as its `ETag`) and
//! `POST /api/v1/steps/{id}/actions/{action}`: every recovery action, through
//! `engine::recovery::perform` as the console's form goes, stale-protected by `If-Match`.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use engine::domain::{OperatorAction, refusal as contract_refusal};
use engine::operators::Operator;
use engine::read::evidence::Evidence;
use engine::recovery::{self, Action, Request};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use super::{id_in, refusal, scoped};
use crate::http::client::{ApiClient, ApiError, ErrorBody};

/// The actions `POST /api/v1/steps/{id}/actions/{action}` knows, by their names.
const STEP_ACTIONS: [OperatorAction; 7] = [
    OperatorAction::CheckDestination,
    OperatorAction::RetrySameKey,
    OperatorAction::AttachEvidence,
    OperatorAction::Waive,
    OperatorAction::AuthorizeAnotherAttempt,
    OperatorAction::Cancel,
    OperatorAction::Replace,
];

/// A step's evidence and what the caller may do with it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct StepBody {
    /// Everything the console's step page shows: identities, digests, the request summary,
    /// attempts and observations, the receipt or its absence, the contract and its trust.
    #[schema(value_type = Object)]
    evidence: Evidence,
    /// The step's version: send it back as `If-Match` (also this answer's `ETag`).
    version: String,
    /// How the adapter's contract was verified, in a sentence (absent for a pure step).
    trust: Option<String>,
    /// The actions the contract permits now and the token's role allows.
    permitted: Vec<String>,
    /// The actions the contract permits now that the token's role does not allow.
    beyond_role: Vec<String>,
    /// Why each other action is refused now, by action.
    #[schema(value_type = Object)]
    refused: serde_json::Map<String, Value>,
}

/// The evidence of one step, evidence first.
#[utoipa::path(
    get,
    path = "/api/v1/steps/{id}",
    operation_id = "show_step",
    params(("id" = String, Path, description = "Step id (a UUID)")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The evidence; `ETag` is the step's version", body = StepBody),
        (status = 400, description = "Not a UUID", body = ErrorBody),
        (status = 401, description = "No or bad bearer token", body = ErrorBody),
        (status = 404, description = "No such step (or one outside the token's prefix)", body = ErrorBody),
    )
)]
pub(crate) async fn show(
    client: ApiClient,
    State(pool): State<PgPool>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = id_in(id, "step")?;
    let evidence = visible_evidence(&client, &pool, id).await?;
    let role = client.0.role;
    let (permitted, beyond_role): (Vec<_>, Vec<_>) = evidence
        .permitted_actions()
        .into_iter()
        .partition(|a| role.may(*a));
    let mut refused = serde_json::Map::new();
    if let Some(facts) = evidence.decision_facts() {
        for action in STEP_ACTIONS {
            if let Some(why) = contract_refusal(&facts, role, action) {
                refused.insert(action.name().to_owned(), Value::String(why));
            }
        }
    }
    let names =
        |actions: Vec<OperatorAction>| actions.iter().map(|a| a.name().to_owned()).collect();
    let version = evidence.version.to_string();
    let body = StepBody {
        trust: evidence.trust.as_ref().map(|t| t.sentence()),
        version: version.clone(),
        permitted: names(permitted),
        beyond_role: names(beyond_role),
        refused,
        evidence,
    };
    Ok(([(header::ETAG, format!("\"{version}\""))], Json(body)).into_response())
}

/// The evidence of step `id` if the token may see it; 404 otherwise, as for a missing step.
pub(super) async fn visible_evidence(
    client: &ApiClient,
    pool: &PgPool,
    id: Uuid,
) -> Result<Evidence, ApiError> {
    match engine::read::evidence::evidence(pool, id).await? {
        Some(e) if client.0.covers(&e.creation_key) => Ok(e),
        Some(_) | None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no step {id}"),
        )),
    }
}

/// What an action takes besides its name: a reason always, and the fields its kind needs.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActionBody {
    /// Why, for the audit log (required).
    reason: String,
    /// attach_evidence: the destination's reference for the effect.
    external_reference: Option<String>,
    /// attach_evidence: what shows the effect happened.
    evidence: Option<String>,
    /// waive: the uncertainty that remains, named.
    residual_uncertainty: Option<String>,
    /// authorize_another_attempt: must be `true`, acknowledging the duplicate risk.
    acknowledge_duplicate_risk: Option<bool>,
    /// replace: the corrected input (the workflow's input when absent).
    #[schema(value_type = Option<Object>)]
    corrected_input: Option<Value>,
}

/// What an action did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct DoneBody {
    /// What happened, in a sentence.
    message: String,
    /// The step to look at next (a replacement's, after `replace`).
    step: Uuid,
}

impl From<recovery::Done> for DoneBody {
    fn from(done: recovery::Done) -> Self {
        DoneBody {
            message: done.message,
            step: done.step,
        }
    }
}

/// Takes one recovery action on a step. The role, the adapter's contract and the step's
/// state decide again under the step's row lock, as for the console's form; with `If-Match`
/// (the version from `GET /api/v1/steps/{id}`), a step that moved answers 412 and nothing
/// changes.
#[utoipa::path(
    post,
    path = "/api/v1/steps/{id}/actions/{action}",
    operation_id = "act_on_step",
    params(
        ("id" = String, Path, description = "Step id (a UUID)"),
        ("action" = String, Path, description = "check_destination, retry_same_key, attach_evidence, waive, authorize_another_attempt, cancel or replace"),
        ("If-Match" = Option<String>, Header, description = "The step's version as last read; 412 when it has moved"),
    ),
    request_body = ActionBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Done", body = DoneBody),
        (status = 400, description = "Malformed JSON, a bad id or a malformed If-Match", body = ErrorBody),
        (status = 403, description = "The token's role does not allow the action", body = ErrorBody),
        (status = 404, description = "No such step or action", body = ErrorBody),
        (status = 409, description = "`not_permitted`: the contract forbids it in this state; `busy`: a worker holds the step", body = ErrorBody),
        (status = 412, description = "The step moved since the version in If-Match", body = ErrorBody),
        (status = 422, description = "A required field is missing or does not apply", body = ErrorBody),
        (status = 503, description = "The destination could not be asked (check_destination)", body = ErrorBody),
    )
)]
pub(crate) async fn act(
    client: ApiClient,
    State(pool): State<PgPool>,
    path: Result<Path<(String, String)>, PathRejection>,
    headers: HeaderMap,
    body: Result<Json<ActionBody>, JsonRejection>,
) -> Result<Json<DoneBody>, ApiError> {
    let Path((id, name)) = path.map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "the step id or action in the path is not valid UTF-8",
        )
    })?;
    let id = id_in(Ok(Path(id)), "step")?;
    let kind = STEP_ACTIONS.into_iter().find(|a| a.name() == name).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("`{name}` is not a step action: use check_destination, retry_same_key, attach_evidence, waive, authorize_another_attempt, cancel or replace"),
        )
    })?;
    let seen_version = if_match(&headers)?;
    let Json(body) = body?;
    let action = action_of(kind, &body)?;
    if scoped(&client) {
        visible_evidence(&client, &pool, id).await?;
    }
    let operator = Operator::token(&client.0);
    let done = recovery::perform(
        &pool,
        Request {
            operator: &operator,
            step: id,
            seen_version,
            reason: &body.reason,
            action,
        },
    )
    .await
    .map_err(refusal)?;
    Ok(Json(DoneBody::from(done)))
}

/// The version `If-Match` names (the strong tag `"123"`, or `123`); `None` without the header.
/// A weak tag (`W/"123"`) is refused: it promises only an equivalent step, and an action needs
/// the very one that was read (RFC 9110 §13.1.1).
pub(super) fn if_match(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    let Some(value) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    let quoted = text.strip_prefix('"').and_then(|t| t.strip_suffix('"'));
    let bare = quoted.unwrap_or(text);
    match bare.parse::<i64>() {
        Ok(version) if !text.starts_with("W/") => Ok(Some(version)),
        _ => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "If-Match `{}` is not a step version: send the strong ETag (or the `version`) from GET /api/v1/steps/{{id}}",
                engine::domain::words::displayable(text)
            ),
        )),
    }
}

/// The engine's action for `kind`, from the body; a field given to an action it does not
/// belong to is refused, so a typo never passes silently.
fn action_of(kind: OperatorAction, body: &ActionBody) -> Result<Action, ApiError> {
    let given = [
        (
            "external_reference",
            body.external_reference.is_some(),
            kind == OperatorAction::AttachEvidence,
        ),
        (
            "evidence",
            body.evidence.is_some(),
            kind == OperatorAction::AttachEvidence,
        ),
        (
            "residual_uncertainty",
            body.residual_uncertainty.is_some(),
            kind == OperatorAction::Waive,
        ),
        (
            "acknowledge_duplicate_risk",
            body.acknowledge_duplicate_risk.is_some(),
            kind == OperatorAction::AuthorizeAnotherAttempt,
        ),
        (
            "corrected_input",
            body.corrected_input.is_some(),
            kind == OperatorAction::Replace,
        ),
    ];
    if let Some((field, _, _)) = given
        .iter()
        .find(|(_, present, belongs)| *present && !belongs)
    {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("`{field}` does not apply to {}", kind.name()),
        ));
    }
    Ok(match kind {
        OperatorAction::CheckDestination => Action::CheckDestination,
        OperatorAction::RetrySameKey => Action::RetrySameKey,
        OperatorAction::AttachEvidence => Action::AttachEvidence {
            external_reference: body.external_reference.clone().unwrap_or_default(),
            evidence: body.evidence.clone().unwrap_or_default(),
        },
        OperatorAction::Waive => Action::Waive {
            residual_uncertainty: body.residual_uncertainty.clone().unwrap_or_default(),
        },
        OperatorAction::AuthorizeAnotherAttempt => Action::AuthorizeAnotherAttempt {
            acknowledged_duplicate_risk: body.acknowledge_duplicate_risk == Some(true),
        },
        OperatorAction::Cancel => Action::Cancel,
        OperatorAction::Replace => Action::Replace {
            corrected_input: body.corrected_input.clone(),
        },
        OperatorAction::ResolveIncident => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "incidents are resolved at POST /api/v1/incidents/{id}/resolve",
            ));
        }
    })
}
