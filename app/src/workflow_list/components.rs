use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_router::components::A;
use leptos_router::hooks::use_query_map;

use engine::domain::identity::percent_encode;

use super::api::{PauseWorkflows, WorkflowList, list_workflows};
use crate::error::ConsoleError;
use crate::forms::kept_or;

const FILTERS: [&str; 5] = ["state", "definition", "adapter", "older_than", "key"];

/// `/workflows`: workflows by filter, newest first, and the bulk pause of those listed.
#[component]
pub fn WorkflowListPage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(
        move || {
            let q = query.read();
            (
                q.get("state"),
                q.get("definition"),
                q.get("adapter"),
                q.get("older_than"),
                q.get("key"),
                q.get("after"),
            )
        },
        |(state, definition, adapter, older_than, key, after)| {
            list_workflows(state, definition, adapter, older_than, key, after)
        },
    );
    view! {
        <section class="page">
            <h1>"Workflows"</h1>
            <Suspense fallback=|| view! { <p>"Loading the workflows…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Ok(list) => view! { <Listed list /> }.into_any(),
                        Err(ConsoleError::SignIn { .. }) => {
                            view! { <p><A href="/sign-in">"Sign in"</A>" to see the workflows."</p> }.into_any()
                        }
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

/// This page's address with the current filters (and `after`, for the next page).
fn address(after: Option<&str>) -> String {
    let query = use_query_map();
    let q = query.read_untracked();
    let mut parts: Vec<String> = FILTERS
        .iter()
        .filter_map(|name| {
            q.get(name)
                .filter(|v| !v.is_empty())
                .map(|v| format!("{name}={}", percent_encode(&v)))
        })
        .collect();
    if let Some(after) = after {
        parts.push(format!("after={after}"));
    }
    match parts.is_empty() {
        true => "/workflows".to_owned(),
        false => format!("/workflows?{}", parts.join("&")),
    }
}

#[component]
fn Listed(list: WorkflowList) -> impl IntoView {
    let query = use_query_map();
    let current = move |name: &str| query.read_untracked().get(name).unwrap_or_default();
    let refusal = list.kept.as_ref().and_then(|k| k.sentence());
    let ids: Vec<String> = list.workflows.iter().map(|w| w.id.clone()).collect();
    let count = ids.len();
    let pause = (list.may_pause && count > 0).then(|| view! {
        <form method="post" action=PauseWorkflows::url() class="stack action danger" data-testid="pause-listed-form">
            <input type="hidden" name="csrf" value=list.csrf.clone() />
            <input type="hidden" name="workflows" value=ids.join(",") />
            <input type="hidden" name="back" value=address(None) />
            <label>"Reason (recorded in the audit log of each)"
                <input type="text" name="reason" required value=kept_or(&list.kept, "reason", "") />
            </label>
            <button type="submit" class="danger">{format!("Pause the {count} workflow(s) listed")}</button>
            <p class="muted small">"No step of them starts until each is resumed on its page; calls in flight settle. Completed, cancelled and paused ones are left as they are."</p>
        </form>
    });
    view! {
        {list.notice.map(|n| view! { <p class="notice ok" role="status" data-testid="notice">{n}</p> })}
        {refusal.map(|r| view! { <p class="notice error" role="alert" data-testid="refusal">{r}</p> })}
        <form method="get" action="/workflows" class="filters" data-testid="filters">
            <label>"State"
                <select name="state">
                    {[("", "any"), ("pending", "Pending"), ("running", "Running"), ("needs_review", "Needs review"), ("completed", "Completed"), ("cancelled", "Cancelled")]
                        .into_iter()
                        .map(|(value, label)| view! { <option value=value selected=current("state") == value>{label}</option> })
                        .collect_view()}
                </select>
            </label>
            <label>"Definition"<input type="text" name="definition" value=current("definition") size="16" /></label>
            <label>"Adapter"<input type="text" name="adapter" value=current("adapter") size="16" /></label>
            <label>"Created more than (min) ago"<input type="number" name="older_than" min="0" value=current("older_than") size="5" /></label>
            <label>"Creation key, request key or external reference"<input type="text" name="key" value=current("key") size="24" /></label>
            <button type="submit">"Apply"</button>
            <a href="/workflows">"Clear"</a>
        </form>
        <table class="queue" data-testid="workflows">
            <caption>"Newest first"</caption>
            <thead>
                <tr><th scope="col">"Workflow"</th><th scope="col">"Definition"</th><th scope="col">"State"</th><th scope="col">"Created"</th></tr>
            </thead>
            <tbody>
                {list.workflows.into_iter().map(|w| view! {
                    <tr data-workflow=w.id.clone()>
                        <td><a href=format!("/workflows/{}", w.id) class="key">{w.creation_key}</a></td>
                        <td>{w.definition}</td>
                        <td>{w.state}</td>
                        <td class="small">{w.created}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
        {(count == 0).then(|| view! { <p class="muted">"No workflow matches."</p> })}
        {list.next.map(|next| view! { <p class="actions"><a href=address(Some(&next))>"Next page"</a></p> })}
        {pause}
    }
}
