use leptos::prelude::*;

use super::types::AuditPage;
use crate::error::ConsoleError;

/// Entries per page of the audit log.
pub const PAGE_SIZE: i64 = 100;

/// One page of the audit log, filtered by actor and action, older than the cursor `before`.
#[server(prefix = "/fn")]
pub async fn audit_log(
    actor: Option<String>,
    action: Option<String>,
    before: Option<String>,
) -> Result<AuditPage, ConsoleError> {
    use super::types::AuditItem;

    crate::auth::api::session::require(engine::domain::Role::Viewer).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let blank = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let text_filter = crate::review::api::text_filter;
    let (actor, action) = (text_filter(&actor)?, text_filter(&action)?);
    let before = match blank(before) {
        None => None,
        Some(text) => Some(text.parse::<i64>().map_err(|_| {
            ConsoleError::Conflict {
                reason: "That page link is not valid; start from the newest entries.".into(),
            }
            .answered()
        })?),
    };
    let mut conn = pool.acquire().await?;
    let mut rows = engine::store::journal::page(
        &mut conn,
        actor.as_deref(),
        action.as_deref(),
        before,
        PAGE_SIZE + 1,
    )
    .await?;
    let next = engine::read::keyset::cut(&mut rows, PAGE_SIZE, |last| last.id.to_string());
    Ok(AuditPage {
        items: rows
            .into_iter()
            .map(|r| AuditItem {
                at: r.at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                actor: r.actor,
                actor_kind: r.actor_kind.as_str().to_owned(),
                action: r.action.replace('_', " "),
                step_id: r.step.map(|s| s.to_string()),
                workflow_id: r.workflow.map(|w| w.to_string()),
                reason: r.reason.unwrap_or_default(),
                details: if r.details.as_object().is_some_and(|o| o.is_empty()) {
                    String::new()
                } else {
                    r.details.to_string()
                },
            })
            .collect(),
        next,
    })
}
