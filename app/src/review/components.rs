use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_query_map;

use engine::domain::identity::percent_encode;

use super::api::review_queue;
use super::types::{FoundStep, QueuePage, QueueQuery};
use crate::error::ConsoleError;
use crate::incidents::list::IncidentTable;
use crate::lists::age;

/// The landing page: steps whose outcome is unknown or that wait for review, oldest
/// uncertainty first, and open integrity incidents.
#[component]
pub fn ReviewQueuePage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(
        move || {
            let q = query.read();
            QueueQuery {
                state: q.get("state"),
                adapter: q.get("adapter"),
                definition: q.get("definition"),
                older_than: q.get("older_than"),
                noted: q.get("noted"),
                q: q.get("q"),
                after: q.get("after"),
            }
        },
        |q| {
            review_queue(
                q.state,
                q.adapter,
                q.definition,
                q.older_than,
                q.noted,
                q.q,
                q.after,
            )
        },
    );
    view! {
        <section class="page">
            <h1>"Review queue"</h1>
            <p class="muted">
                "Steps whose outcome nobody knows yet, oldest uncertainty first. Evidence comes first; the actions each adapter's contract permits follow it."
            </p>
            <Suspense fallback=|| view! { <p>"Loading the queue…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Ok(page) => view! { <Queue page /> }.into_any(),
                        Err(ConsoleError::SignIn { .. }) => {
                            view! {
                                <p>
                                    <A href="/sign-in">"Sign in"</A>
                                    " to see the review queue."
                                </p>
                            }
                                .into_any()
                        }
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn Queue(page: QueuePage) -> impl IntoView {
    let QueuePage {
        items,
        incidents,
        next,
        by_state,
        by_adapter,
        definitions,
        found,
        alerts,
    } = page;
    let empty = items.is_empty();
    let query = use_query_map();
    let current = move |name: &str| query.read_untracked().get(name).unwrap_or_default();
    let option = move |field: &'static str, value: String, label: String| {
        let selected = current(field) == value;
        view! { <option value=value selected=selected>{label}</option> }
    };
    let total: i64 = by_state.iter().map(|(_, n)| n).sum();
    view! {
        {(!alerts.is_empty()).then(|| view! {
            <div class="notice warn" role="status" data-testid="alerts">
                <strong>{format!("{} open alert(s)", alerts.len())}</strong>
                <ul>
                    {alerts
                        .into_iter()
                        .map(|(rule, subject, secs)| view! { <li>{format!("{rule}: {subject} (for {})", age(secs))}</li> })
                        .collect_view()}
                </ul>
            </div>
        })}
        <form method="get" action="/" class="filters" data-testid="filters">
            <label>"Search"
                <input type="search" name="q" value=current("q")
                    placeholder="workflow id, creation key, request key, external reference" size="40" />
            </label>
            <label>"State"
                <select name="state">
                    {option("state", String::new(), format!("any ({total})"))}
                    {by_state
                        .into_iter()
                        .map(|(state, n)| option("state", format!("{state:?}").to_lowercase(), format!("{} ({n})", state.label())))
                        .collect_view()}
                </select>
            </label>
            <label>"Adapter"
                <select name="adapter">
                    {option("adapter", String::new(), format!("any ({total})"))}
                    {by_adapter
                        .into_iter()
                        .map(|(adapter, n)| option("adapter", adapter.clone(), format!("{adapter} ({n})")))
                        .collect_view()}
                </select>
            </label>
            <label>"Definition"
                <select name="definition">
                    {option("definition", String::new(), "any".to_owned())}
                    {definitions
                        .into_iter()
                        .map(|definition| option("definition", definition.clone(), definition))
                        .collect_view()}
                </select>
            </label>
            <label>"Waiting for more than (min)"
                <input type="number" name="older_than" min="0" value=current("older_than") size="5" />
            </label>
            <label>"Notes"
                <select name="noted">
                    {option("noted", String::new(), "with or without".to_owned())}
                    {option("noted", "today".to_owned(), "has a note from today".to_owned())}
                    {option("noted", "week".to_owned(), "has a note from this week".to_owned())}
                    {option("noted", "any".to_owned(), "has a note".to_owned())}
                </select>
            </label>
            <button type="submit">"Apply"</button>
            <a href="/">"Clear"</a>
        </form>
        {found.map(|found| view! { <Found found /> })}

        <table class="queue">
            <caption>"Waiting for a person"</caption>
            <thead>
                <tr>
                    <th scope="col">"Workflow"</th>
                    <th scope="col">"Step"</th>
                    <th scope="col">"Status"</th>
                    <th scope="col">"Adapter"</th>
                    <th scope="col" class="num">"Waiting for"</th>
                    <th scope="col" class="num">"Attempts"</th>
                </tr>
            </thead>
            <tbody>
                {items
                    .into_iter()
                    .map(|item| {
                        view! {
                            <tr data-step=item.step_id.clone()>
                                <td>
                                    <span class="key">{item.creation_key}</span>
                                    <br />
                                    <code class="muted">{item.request_key}</code>
                                </td>
                                <td>
                                    <a href=format!("/steps/{}", item.step_id)>{item.logical}</a>
                                </td>
                                <td>
                                    <span class=format!("badge {:?}", item.state).to_lowercase()>
                                        {item.state.label()}
                                    </span>
                                    {item.open_incident.then(|| view! { <span class="badge incident">"Incident"</span> })}
                                    {item.noted.then(|| view! { <span class="badge" data-testid="noted">"Note"</span> })}
                                    {item.sentence.map(|s| view! { <br /><span class="muted small">{s}</span> })}
                                </td>
                                <td>
                                    {item.adapter}
                                    <br />
                                    <span class="muted small">{item.capabilities}</span>
                                </td>
                                <td class="num">{age(item.unknown_age_secs)}</td>
                                <td class="num">{item.attempts}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
        {empty.then(|| view! { <p class="muted">"Nothing is waiting: every outcome is known."</p> })}
        {next.map(|cursor| {
            view! {
                <p class="actions">
                    <a href=next_page(&cursor)>"Next page"</a>
                </p>
            }
        })}
        {(incidents.open > 0).then(|| {
            let summary = format!("the {} oldest of {} open: ", incidents.incidents.len(), incidents.open);
            view! {
                <IncidentTable incidents=incidents.incidents />
                <p class="muted" data-testid="incidents-open">
                    {summary}
                    <A href="/incidents">"every open incident"</A>
                </p>
            }
        })}
    }
}

/// The next page's address: the same filters, after `cursor`.
fn next_page(cursor: &str) -> String {
    let query = use_query_map();
    let q = query.read_untracked();
    let mut href = format!("/?after={}", percent_encode(cursor));
    for name in ["state", "adapter", "definition", "older_than", "noted"] {
        if let Some(value) = q.get(name).filter(|v| !v.is_empty()) {
            href.push_str(&format!("&{name}={}", percent_encode(&value)));
        }
    }
    href
}

/// The steps of the workflows a search named, in any state.
#[component]
fn Found(found: Vec<FoundStep>) -> impl IntoView {
    let empty = found.is_empty();
    view! {
        <table class="queue" data-testid="found">
            <caption>"Search results"</caption>
            <thead>
                <tr>
                    <th scope="col">"Workflow"</th>
                    <th scope="col">"Step"</th>
                    <th scope="col">"State"</th>
                    <th scope="col">"Adapter"</th>
                    <th scope="col">"Request key · external reference"</th>
                </tr>
            </thead>
            <tbody>
                {found
                    .into_iter()
                    .map(|f| view! {
                        <tr>
                            <td class="key">{f.creation_key}</td>
                            <td><a href=format!("/steps/{}", f.step_id)>{f.logical}</a></td>
                            <td>{f.state.label()}</td>
                            <td>{f.adapter}</td>
                            <td class="small"><code>{f.request_key}</code><br />{f.external_reference}</td>
                        </tr>
                    })
                    .collect_view()}
            </tbody>
        </table>
        {empty.then(|| view! { <p class="muted">"No workflow matches that search."</p> })}
    }
}
