use engine::domain::AuditAction;
use leptos::prelude::*;
use leptos_router::components::{A, Form};
use leptos_router::hooks::use_query_map;

use super::api::audit_log;
use super::types::AuditPage;
use crate::error::ConsoleError;

/// `/audit`: who did what, when and why; filterable by actor and action, newest first.
#[component]
pub fn AuditLogPage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(
        move || {
            let q = query.read();
            (q.get("actor"), q.get("action"), q.get("before"))
        },
        |(actor, action, before)| audit_log(actor, action, before),
    );
    let field = move |name: &str| query.read_untracked().get(name).unwrap_or_default();
    view! {
        <section class="page">
            <h1>"Audit log"</h1>
            <p class="muted">"Every operator action, API call and engine decision that changed something. Entries are never edited or removed."</p>
            <Form method="GET" action="/audit" attr:class="filters">
                <label>"Actor" <input type="text" name="actor" value=field("actor") /></label>
                <label>"Action"
                    <select name="action">
                        <option value="">"any"</option>
                        {AuditAction::ALL
                            .into_iter()
                            .map(|a| a.as_str())
                            .map(|a| {
                                let selected = field("action") == a;
                                view! { <option value=a selected=selected>{a.replace('_', " ")}</option> }
                            })
                            .collect_view()}
                    </select>
                </label>
                <button type="submit">"Filter"</button>
            </Form>
            <Suspense fallback=|| view! { <p>"Loading the audit log…"</p> }>
                {move || Suspend::new(async move {
                    match page.await {
                        Ok(page) => view! { <Entries page /> }.into_any(),
                        Err(ConsoleError::SignIn { .. }) => {
                            view! { <p><A href="/sign-in">"Sign in"</A>" to read the audit log."</p> }.into_any()
                        }
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn Entries(page: AuditPage) -> impl IntoView {
    let query = use_query_map();
    let next_href = page.next.map(|before| {
        let q = query.read_untracked();
        format!(
            "/audit?actor={}&action={}&before={before}",
            q.get("actor").unwrap_or_default(),
            q.get("action").unwrap_or_default()
        )
    });
    let empty = page.items.is_empty();
    view! {
        <table class="queue" data-testid="audit">
            <thead>
                <tr>
                    <th scope="col">"When"</th>
                    <th scope="col">"Who"</th>
                    <th scope="col">"Did"</th>
                    <th scope="col">"Reason"</th>
                    <th scope="col">"Details"</th>
                </tr>
            </thead>
            <tbody>
                {page
                    .items
                    .into_iter()
                    .map(|e| view! {
                        <tr>
                            <td class="small">{e.at}</td>
                            <td>{e.actor}<br /><span class="muted small">{e.actor_kind}</span></td>
                            <td>
                                {match e.step_id {
                                    Some(step) => view! { <A href=format!("/steps/{step}")>{e.action}</A> }.into_any(),
                                    None => e.action.into_any(),
                                }}
                            </td>
                            <td>{e.reason}</td>
                            <td class="small"><code>{e.details}</code></td>
                        </tr>
                    })
                    .collect_view()}
            </tbody>
        </table>
        {empty.then(|| view! { <p class="muted">"No entries match."</p> })}
        {next_href.map(|href| view! { <p><A href=href>"Older entries"</A></p> })}
    }
}
