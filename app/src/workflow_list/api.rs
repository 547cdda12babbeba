use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::ConsoleError;
use crate::forms::KeptForm;

/// Rows per page.
#[cfg(feature = "ssr")]
const PAGE: i64 = 100;

/// One workflow as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowLine {
    pub id: String,
    pub creation_key: String,
    pub definition: String,
    pub state: String,
    pub created: String,
}

/// One page of the list, and what the bulk pause needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowList {
    pub workflows: Vec<WorkflowLine>,
    /// The next page's cursor.
    pub next: Option<String>,
    /// The signed-in person may pause (an operator or an approver).
    pub may_pause: bool,
    pub csrf: String,
    pub notice: Option<String>,
    /// The bulk pause this session last posted and the server refused, as typed.
    pub kept: Option<KeptForm>,
}

/// Workflows matching the filters, newest first, after `after`.
#[server(prefix = "/fn")]
pub async fn list_workflows(
    state: Option<String>,
    definition: Option<String>,
    adapter: Option<String>,
    older_than: Option<String>,
    key: Option<String>,
    after: Option<String>,
) -> Result<WorkflowList, ConsoleError> {
    use crate::auth::api::session;
    use engine::domain::Role;
    use leptos::server_fn::ServerFn;

    let operator = session::require(Role::Viewer).await?;
    let current = session::current().await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let invalid = |what: &str| {
        let what = engine::domain::words::displayable(what);
        ConsoleError::Invalid {
            reason: format!("`{what}` is not a filter this list knows."),
        }
        .answered()
    };
    // Blank is no filter; a filter too long or with a NUL is refused in words.
    let text = crate::review::api::text_filter;
    let blank = |v: Option<String>| v.filter(|v| !v.trim().is_empty());
    let query = engine::read::workflows::WorkflowQuery {
        state: match blank(state) {
            None => None,
            Some(s) => Some(serde_json::from_value(s.clone().into()).map_err(|_| invalid(&s))?),
        },
        definition: text(&definition)?,
        adapter: text(&adapter)?,
        created_before: match blank(older_than) {
            None => None,
            Some(m) => {
                let minutes: u32 = m.trim().parse().map_err(|_| invalid(&m))?;
                Some(chrono::Utc::now() - chrono::Duration::minutes(i64::from(minutes)))
            }
        },
        creation_key: None,
        request_key: None,
        external_reference: None,
        creation_key_prefix: None,
        key: text(&key)?,
        after: match blank(after) {
            None => None,
            Some(a) => Some(uuid::Uuid::parse_str(&a).map_err(|_| invalid(&a))?),
        },
        limit: PAGE,
    };
    let page = engine::read::workflows::list(&pool, &query).await?;
    Ok(WorkflowList {
        workflows: page
            .workflows
            .into_iter()
            .map(|w| WorkflowLine {
                id: w.id.to_string(),
                creation_key: w.creation_key,
                definition: format!("{} v{}", w.definition, w.definition_version),
                state: match w.archived_at {
                    Some(_) => format!("{} · archived", w.state.label()),
                    None => w.state.label().to_owned(),
                },
                created: w.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
            })
            .collect(),
        next: page.next.map(|n| n.to_string()),
        may_pause: operator.role >= Role::Operator,
        csrf: session::csrf_token(&current).await?,
        notice: session::take_notice(&current).await?,
        kept: session::take_form(PauseWorkflows::PATH).await?,
    })
}

/// Pauses the workflows listed (`workflows`: their ids, comma-separated), as an operator.
#[server(prefix = "/fn")]
pub async fn pause_workflows(
    workflows: String,
    reason: String,
    back: String,
    csrf: String,
) -> Result<String, ConsoleError> {
    use crate::auth::api::session;

    let (operator, current, pool) = session::acting(&csrf).await?;
    let ids = workflows
        .split(',')
        .filter(|id| !id.trim().is_empty())
        .map(|id| uuid::Uuid::parse_str(id.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| {
            ConsoleError::Invalid {
                reason: "The list of workflows is malformed.".into(),
            }
            .answered()
        })?;
    let done = engine::recovery::pause::pause_workflows(&pool, &operator, &ids, &reason)
        .await
        .map_err(|e| ConsoleError::from(e).answered())?;
    session::set_notice(&current, &done.message).await?;
    // Back to the same filtered list; only a path on this site.
    let back = if back.starts_with("/workflows") {
        back
    } else {
        "/workflows".to_owned()
    };
    leptos_axum::redirect(&back);
    Ok(done.message)
}
