use leptos::prelude::*;

use crate::error::ConsoleError;

#[cfg(feature = "ssr")]
async fn project(id: &str) -> Result<engine::read::status::WorkflowStatus, ConsoleError> {
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let id = uuid::Uuid::parse_str(id).map_err(|_| ConsoleError::NotFound.answered())?;
    engine::read::status::project(&pool, id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound.answered())
}

/// Every step of workflow `id`, for operators.
#[server(prefix = "/fn")]
pub async fn workflow_steps(id: String) -> Result<super::types::WorkflowData, ConsoleError> {
    crate::auth::api::session::require(engine::domain::Role::Viewer).await?;
    let w = project(&id).await?;
    Ok(super::types::WorkflowData {
        id: w.id.to_string(),
        creation_key: w.creation_key,
        definition: format!("{} v{}", w.definition, w.definition_version),
        state: w.state.label().to_owned(),
        status: w.status,
        steps: w
            .steps
            .into_iter()
            .map(|s| super::types::StepRow {
                id: s.id.to_string(),
                logical: s.logical,
                generation: s.generation,
                state: s.state,
                attempts: s.attempts,
                request_key: s.request_key.unwrap_or_default(),
                external_reference: s.external_reference.unwrap_or_default(),
                depends_on: s.depends_on,
            })
            .collect(),
    })
}

/// The one sentence the customer of workflow `id` reads, from the status projection. Public:
/// the workflow id is the capability, and the sentence names no internal detail beyond an
/// external reference.
#[server(prefix = "/fn")]
pub async fn customer_status(id: String) -> Result<(String, String), ConsoleError> {
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let id = uuid::Uuid::parse_str(&id).map_err(|_| ConsoleError::NotFound.answered())?;
    let (sentence, at) = engine::read::status::customer_status(&pool, id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound.answered())?;
    Ok((sentence, at.format("%Y-%m-%d %H:%M UTC").to_string()))
}
