use leptos::prelude::*;

use super::types::IncidentView;
use crate::error::ConsoleError;

/// The incident `id`, with the evidence of each reference.
#[server(prefix = "/fn")]
pub async fn incident_detail(id: String) -> Result<IncidentView, ConsoleError> {
    use super::types::ReferenceView;
    use crate::auth::api::session;
    use engine::domain::{OperatorAction, Role};

    let operator = session::require(Role::Viewer).await?;
    let current = session::current().await?;
    let notice = session::take_notice(&current).await?;
    let csrf = session::csrf_token(&current).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let id = uuid::Uuid::parse_str(&id).map_err(|_| ConsoleError::NotFound.answered())?;
    let kept = {
        use leptos::server_fn::ServerFn;
        session::take_form(ResolveIncident::PATH)
            .await?
            .filter(|kept| kept.field("incident") == Some(id.to_string().as_str()))
    };
    let i = engine::read::incident::incident(&pool, id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound.answered())?;
    let time = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    let notes =
        crate::notes::api::notes_of(&pool, i.workflow_id, |n| n.incident == Some(id)).await?;
    let note = crate::notes::api::note_form(&operator, id).await?;
    Ok(IncidentView {
        notes,
        note,
        id: i.id.to_string(),
        kind: i.kind.words().to_owned(),
        opened_at: time(i.opened_at),
        step_id: i.step_id.to_string(),
        workflow_id: i.workflow_id.to_string(),
        creation_key: i.creation_key,
        logical: i.logical,
        adapter: i.adapter.unwrap_or_default(),
        request_key: i.request_key.unwrap_or_default(),
        references: i
            .references
            .into_iter()
            .map(|r| ReferenceView {
                external_reference: r.external_reference,
                request_key: r.request_key.unwrap_or_else(|| "—".into()),
                evidence: if r.evidence.as_object().is_some_and(|o| o.is_empty()) {
                    "seen by a status lookup".into()
                } else {
                    r.evidence.to_string()
                },
                observed_at: time(r.observed_at),
                on_receipt: r.on_receipt,
            })
            .collect(),
        resolution: i.resolution.map(|r| {
            format!(
                "{} stands; {} — by {} at {}: {}",
                r.canonical_reference,
                r.disposition.replace('_', " "),
                r.resolved_by,
                time(r.resolved_at),
                r.reason
            )
        }),
        withdrawals: i
            .withdrawals
            .into_iter()
            .map(|(step, reference, state)| (step.to_string(), reference, state.label().to_owned()))
            .collect(),
        withdrawable: i.withdrawable,
        may_resolve: operator.role.may(OperatorAction::ResolveIncident),
        csrf,
        notice,
        kept,
    })
}

/// Resolves incident `incident`: `canonical` stands, the others are withdrawn
/// (`disposition = "withdraw"`) or accepted as unresolved (`"accept_unresolved"`).
#[server(prefix = "/fn")]
pub async fn resolve_incident(
    incident: String,
    canonical: Option<String>,
    disposition: Option<String>,
    reason: String,
    csrf: String,
) -> Result<String, ConsoleError> {
    use crate::auth::api::session;
    use engine::domain::Disposition;

    let (operator, current, pool) = session::acting(&csrf).await?;
    let id = uuid::Uuid::parse_str(&incident).map_err(|_| ConsoleError::NotFound.answered())?;
    let disposition = match disposition.as_deref() {
        Some("withdraw") => Disposition::Withdraw,
        Some("accept_unresolved") => Disposition::AcceptUnresolved,
        _ => {
            return Err(ConsoleError::Invalid {
                reason:
                    "Choose what happens to the duplicate: withdraw it, or accept it as unresolved."
                        .into(),
            }
            .answered());
        }
    };
    let canonical = canonical.unwrap_or_default();
    let done = engine::recovery::incident::resolve_incident(
        &pool,
        &operator,
        id,
        &canonical,
        disposition,
        &reason,
    )
    .await
    .map_err(|e| ConsoleError::from(e).answered())?;
    session::set_notice(&current, &done.message).await?;
    leptos_axum::redirect(&format!("/incidents/{id}"));
    Ok(done.message)
}
