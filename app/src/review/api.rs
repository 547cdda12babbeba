use leptos::prelude::*;

use super::types::QueuePage;
use crate::error::ConsoleError;

/// Rows per page of the review queue.
pub const PAGE_SIZE: i64 = 50;

/// One page of the review queue after the keyset cursor `after` (from a previous page).
#[server(prefix = "/fn")]
pub async fn review_queue(after: Option<String>) -> Result<QueuePage, ConsoleError> {
    use super::types::{IncidentItem, QueueItem};
    use chrono::{DateTime, Utc};

    crate::auth::api::session::require(engine::domain::Role::Viewer).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let cursor = match after.as_deref().filter(|a| !a.is_empty()) {
        None => None,
        Some(text) => {
            let parsed = text.split_once('|').and_then(|(at, id)| {
                Some((
                    DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc),
                    uuid::Uuid::parse_str(id).ok()?,
                ))
            });
            Some(parsed.ok_or_else(|| {
                ConsoleError::Conflict {
                    reason: "That page link is not valid; start from the first page.".into(),
                }
                .answered()
            })?)
        }
    };
    let now = Utc::now();
    let mut rows = engine::review::queue(&pool, cursor, PAGE_SIZE + 1).await?;
    let next = (rows.len() > PAGE_SIZE as usize).then(|| {
        rows.truncate(PAGE_SIZE as usize);
        let last = rows.last().expect("a full page has a last row");
        format!("{}|{}", last.unknown_since.to_rfc3339(), last.step_id)
    });
    let incidents = if cursor.is_none() {
        engine::review::open_incidents(&pool, PAGE_SIZE).await?
    } else {
        Vec::new()
    };
    Ok(QueuePage {
        items: rows
            .into_iter()
            .map(|r| QueueItem {
                step_id: r.step_id.to_string(),
                workflow_id: r.workflow_id.to_string(),
                creation_key: r.creation_key,
                logical: r.logical,
                state: r.state,
                adapter: r.adapter.unwrap_or_default(),
                capabilities: r.capabilities,
                unknown_age_secs: (now - r.unknown_since).num_seconds(),
                attempts: r.attempts,
                request_key: r.request_key.unwrap_or_default(),
                open_incident: r.open_incident,
            })
            .collect(),
        incidents: incidents
            .into_iter()
            .map(|i| IncidentItem {
                incident_id: i.incident_id.to_string(),
                workflow_id: i.workflow_id.to_string(),
                creation_key: i.creation_key,
                kind: i.kind.replace('_', " "),
                open_secs: (now - i.opened_at).num_seconds(),
                references: i.references,
            })
            .collect(),
        next,
    })
}
