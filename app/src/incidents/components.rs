use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::api::{ResolveIncident, incident_detail};
use super::types::IncidentView;
use crate::error::ConsoleError;
use crate::forms::kept_or;
use crate::notes::components::{AddNoteForm, NoteList};

/// `/incidents/:id`: one logical step, every external reference with its evidence, and the
/// resolution (or the form that names it: a plain form, which comes back to this page).
#[component]
pub fn IncidentPage() -> impl IntoView {
    let params = use_params_map();
    let incident = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        incident_detail,
    );
    view! {
        <section class="page">
            <Suspense fallback=|| view! { <p>"Loading the incident…"</p> }>
                {move || Suspend::new(async move {
                    match incident.await {
                        Ok(i) => view! { <Incident i /> }.into_any(),
                        Err(ConsoleError::SignIn { .. }) => {
                            view! { <p><A href="/sign-in">"Sign in"</A>" to see this incident."</p> }.into_any()
                        }
                        Err(ConsoleError::NotFound) => view! { <h1>"No such incident"</h1> }.into_any(),
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn Incident(i: IncidentView) -> impl IntoView {
    let open = i.resolution.is_none();
    let references = i.references.clone();
    let refusal = i
        .kept
        .as_ref()
        .and_then(|k| k.sentence())
        .map(|e| view! { <p class="notice error" role="alert" data-testid="refusal">{e}</p> });
    let kept = i.kept.clone();
    let chose = move |name: &str, value: &str| kept_or(&kept, name, "") == value;
    let reason = kept_or(&i.kept, "reason", "");
    view! {
        <h1>{format!("{} incident · {} · {}", i.kind, i.creation_key, i.logical)}</h1>
        {i.notice.map(|n| view! { <p class="notice ok" role="status" data-testid="notice">{n}</p> })}
        {refusal}
        <p class="muted">
            {format!("One logical step, request key {}, adapter {}; opened {}.", i.request_key, i.adapter, i.opened_at)}
            " " <A href=format!("/steps/{}", i.step_id)>"The step's evidence"</A>
        </p>
        <table class="queue" data-testid="references">
            <caption>"External references the destination holds for this one step"</caption>
            <thead>
                <tr><th scope="col">"Reference"</th><th scope="col">"Request key"</th><th scope="col">"Evidence"</th><th scope="col">"Observed"</th></tr>
            </thead>
            <tbody>
                {references
                    .into_iter()
                    .map(|r| view! {
                        <tr>
                            <td><code>{r.external_reference}</code>{r.on_receipt.then_some(" (on the receipt)")}</td>
                            <td><code>{r.request_key}</code></td>
                            <td class="small">{r.evidence}</td>
                            <td class="small">{r.observed_at}</td>
                        </tr>
                    })
                    .collect_view()}
            </tbody>
        </table>
        {i.resolution.map(|r| view! { <p class="notice ok" data-testid="resolution">"Resolved: " {r}</p> })}
        {(!i.withdrawals.is_empty()).then(|| view! {
            <h2>"Withdrawals"</h2>
            <ul data-testid="withdrawals">
                {i.withdrawals
                    .into_iter()
                    .map(|(step, reference, state)| view! {
                        <li><A href=format!("/steps/{step}")>{format!("Withdraw {reference}")}</A>" — "{state}</li>
                    })
                    .collect_view()}
            </ul>
        })}
        {(open && i.may_resolve).then(|| view! {
            <h2>"Resolve"</h2>
            <form method="post" action=ResolveIncident::url() class="stack action danger">
                <input type="hidden" name="csrf" value=i.csrf.clone() />
                <input type="hidden" name="incident" value=i.id.clone() />
                <fieldset>
                    <legend>"The canonical result (the one that stands)"</legend>
                    {i.references
                        .iter()
                        .map(|r| view! {
                            <label class="check">
                                <input type="radio" name="canonical" value=r.external_reference.clone() required
                                    checked=chose("canonical", &r.external_reference) />
                                <code>{r.external_reference.clone()}</code>
                            </label>
                        })
                        .collect_view()}
                </fieldset>
                <fieldset>
                    <legend>"The duplicate's disposition"</legend>
                    {i.withdrawable.then(|| view! {
                        <label class="check">
                            <input type="radio" name="disposition" value="withdraw" required checked=chose("disposition", "withdraw") />
                            "Request withdrawal (a compensation step with its own key and receipt; it can itself end unknown)"
                        </label>
                    })}
                    <label class="check">
                        <input type="radio" name="disposition" value="accept_unresolved" required
                            checked=chose("disposition", "accept_unresolved") />
                        "Accept it as unresolved (the status will say so, never plain success)"
                    </label>
                </fieldset>
                <label>"Reason (recorded in the audit log)"
                    <textarea name="reason" required rows="2">{reason.clone()}</textarea>
                </label>
                <button type="submit" class="danger">"Resolve incident"</button>
            </form>
        })}
        {(open && !i.may_resolve).then(|| view! {
            <p class="muted">"Resolving an incident needs the approver role."</p>
        })}
        <h2>"Notes"</h2>
        <NoteList notes=i.notes.clone() />
        <AddNoteForm on="incident" id=i.id.clone() form=i.note.clone() />
    }
}
