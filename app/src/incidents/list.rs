//! `/incidents`: every open integrity incident, oldest first, a page at a time. The review
//! queue shows the oldest ten and links here (docs/DESIGN.md §9).

use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_query_map;
use serde::{Deserialize, Serialize};

use engine::domain::identity::percent_encode;

use crate::error::ConsoleError;
use crate::lists::age;

/// Incidents per page of `/incidents`.
pub const PAGE_SIZE: i64 = 50;

/// An open integrity incident, as a list shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentItem {
    pub incident_id: String,
    pub workflow_id: String,
    pub creation_key: String,
    pub kind: String,
    pub open_secs: i64,
    pub references: Vec<String>,
}

/// One page of the open incidents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenIncidents {
    pub incidents: Vec<IncidentItem>,
    /// The keyset cursor of the next page, when there is one.
    pub next: Option<String>,
    /// How many are open in all.
    pub open: i64,
}

/// Up to `limit` open incidents after the keyset cursor `after` (`<opened at>|<id>`), and how
/// many are open in all.
#[cfg(feature = "ssr")]
pub async fn open_incident_items(
    pool: &sqlx::PgPool,
    limit: i64,
    after: Option<engine::read::keyset::Position>,
) -> Result<OpenIncidents, ConsoleError> {
    let page = engine::read::queue::open_incident_page(pool, limit, None, after).await?;
    let now = chrono::Utc::now();
    let incidents = page
        .rows
        .into_iter()
        .map(|i| IncidentItem {
            incident_id: i.incident_id.to_string(),
            workflow_id: i.workflow_id.to_string(),
            creation_key: i.creation_key,
            kind: i.kind.words().to_owned(),
            open_secs: (now - i.opened_at).num_seconds(),
            references: i.references,
        })
        .collect();
    Ok(OpenIncidents {
        incidents,
        next: page.next.map(engine::read::keyset::format),
        open: page.open,
    })
}

/// One page of `/incidents`.
#[server(prefix = "/fn")]
pub async fn incident_list(after: Option<String>) -> Result<OpenIncidents, ConsoleError> {
    crate::auth::api::session::require(engine::domain::Role::Viewer).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let after = crate::lists::keyset_cursor(after.as_deref())?;
    open_incident_items(&pool, PAGE_SIZE, after).await
}

/// `/incidents`: the open integrity incidents, oldest first.
#[component]
pub fn IncidentListPage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(move || query.read().get("after"), incident_list);
    view! {
        <section class="page">
            <h1>"Open integrity incidents"</h1>
            <p class="muted">
                "One logical step, more than one effect at the destination (or a request that changed under its key), oldest first. Each names the references the destination holds."
            </p>
            <Suspense fallback=|| view! { <p>"Loading the incidents…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Ok(list) => {
                            let next = list.next.map(|cursor| {
                                view! {
                                    <p class="actions">
                                        <a href=format!("/incidents?after={}", percent_encode(&cursor))>"Next page"</a>
                                    </p>
                                }
                            });
                            let summary = format!("{} open.", list.open);
                            view! {
                                <p data-testid="incidents-open">{summary}</p>
                                <IncidentTable incidents=list.incidents />
                                {next}
                            }
                                .into_any()
                        }
                        Err(ConsoleError::SignIn { .. }) => {
                            view! { <p><A href="/sign-in">"Sign in"</A>" to see the incidents."</p> }.into_any()
                        }
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

/// Open incidents as a table: the workflow, the kind (a link to the incident), the references
/// and how long it has been open. Nothing when there are none.
#[component]
pub fn IncidentTable(incidents: Vec<IncidentItem>) -> impl IntoView {
    (!incidents.is_empty()).then(|| {
        view! {
            <table class="queue">
                <caption>"Open integrity incidents"</caption>
                <thead>
                    <tr>
                        <th scope="col">"Workflow"</th>
                        <th scope="col">"Kind"</th>
                        <th scope="col">"External references"</th>
                        <th scope="col" class="num">"Open for"</th>
                    </tr>
                </thead>
                <tbody>
                    {incidents
                        .into_iter()
                        .map(|i| {
                            let href = format!("/incidents/{}", i.incident_id);
                            view! {
                                <tr data-incident=i.incident_id>
                                    <td class="key">{i.creation_key}</td>
                                    <td><A href=href>{i.kind}</A></td>
                                    <td>{i.references.join(", ")}</td>
                                    <td class="num">{age(i.open_secs)}</td>
                                </tr>
                            }
                        })
                        .collect_view()}
                </tbody>
            </table>
        }
    })
}
