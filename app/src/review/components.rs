use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_query_map;

use super::api::review_queue;
use super::types::{QueuePage, age};
use crate::error::ConsoleError;

/// The landing page: steps whose outcome is unknown or that wait for review, oldest
/// uncertainty first, and open integrity incidents.
#[component]
pub fn ReviewQueuePage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(move || query.read().get("after"), review_queue);
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
    } = page;
    let empty = items.is_empty();
    view! {
        <table class="queue">
            <caption>"Outcome unknown or review required"</caption>
            <thead>
                <tr>
                    <th scope="col">"Workflow"</th>
                    <th scope="col">"Step"</th>
                    <th scope="col">"Status"</th>
                    <th scope="col">"Adapter"</th>
                    <th scope="col" class="num">"Unknown for"</th>
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
                    <a href=format!("/?after={}", urlencode(&cursor))>"Next page"</a>
                </p>
            }
        })}
        {(!incidents.is_empty())
            .then(|| {
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
                                    view! {
                                        <tr data-incident=i.incident_id>
                                            <td class="key">{i.creation_key}</td>
                                            <td>{i.kind}</td>
                                            <td>{i.references.join(", ")}</td>
                                            <td class="num">{age(i.open_secs)}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                }
            })}
    }
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
