use leptos::prelude::*;

use super::types::StepEvidence;
use crate::error::ConsoleError;

/// The evidence of step `id`.
#[server(prefix = "/fn")]
pub async fn evidence_of_step(id: String) -> Result<StepEvidence, ConsoleError> {
    use super::types::AttemptView;
    use engine::domain::{StepFacts, permitted_actions};

    crate::auth::api::session::require(engine::domain::Role::Viewer).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let id = uuid::Uuid::parse_str(&id).map_err(|_| ConsoleError::NotFound.answered())?;
    let e = engine::review::evidence(&pool, id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound.answered())?;
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
            .unwrap_or_else(|| "—".into())
    };
    let permitted = e
        .contract
        .as_ref()
        .map(|contract| {
            permitted_actions(&StepFacts {
                state: e.state,
                contract,
                last_lookup: e.last_lookup.as_ref(),
                request_prepared: e.request_key.is_some(),
                open_incident: e.open_incident,
            })
        })
        .unwrap_or_default();
    Ok(StepEvidence {
        step_id: e.step_id.to_string(),
        workflow_id: e.workflow_id.to_string(),
        creation_key: e.creation_key,
        logical: e.logical,
        definition_version: e.definition_version,
        state: e.state,
        adapter: e.adapter.unwrap_or_else(|| "— (a pure step)".into()),
        capabilities: e
            .contract
            .as_ref()
            .map(|c| c.capabilities_summary())
            .unwrap_or_default(),
        visibility_window_ms: e.contract.as_ref().map_or(0, |c| c.visibility_window_ms),
        deadline_ms: e.contract.as_ref().map_or(0, |c| c.deadline_ms),
        document_digest: e.document_digest.unwrap_or_else(|| "—".into()),
        request_key: e
            .request_key
            .unwrap_or_else(|| "— (not prepared yet)".into()),
        input_digest: e.input_digest.unwrap_or_else(|| "—".into()),
        request_summary: e
            .request_summary
            .map(|s| serde_json::to_string_pretty(&s).unwrap_or_default())
            .unwrap_or_else(|| "—".into()),
        first_sent: time(e.first_sent_at),
        last_sent: time(e.last_sent_at),
        unknown_since: time(e.unknown_since),
        receipt: e.receipt.map(|(method, reference, at)| {
            format!(
                "{reference}, by {}, observed {}",
                method.replace('_', " "),
                time(Some(at))
            )
        }),
        attempts: e
            .attempts
            .into_iter()
            .map(|a| AttemptView {
                number: a.number,
                id: a.id.to_string(),
                worker: a.worker,
                lease_until: time(Some(a.lease_expires_at)),
                started: time(Some(a.started_at)),
                call_began: time(a.invoked_at),
                ended: time(a.ended_at),
                outcome: a.outcome.map_or("in progress", |o| o.label()).to_owned(),
                observation: a.observation.unwrap_or_default(),
            })
            .collect(),
        timeline: e
            .timeline
            .into_iter()
            .map(|t| (time(Some(t.at)), t.what, t.detail))
            .collect(),
        open_incident: e.open_incident,
        permitted,
    })
}
