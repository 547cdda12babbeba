use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use super::api::evidence_of_step;
use super::types::StepEvidence;
use crate::error::ConsoleError;

/// `/steps/:id`: evidence at the top, what the contract permits below it.
#[component]
pub fn StepPage() -> impl IntoView {
    let params = use_params_map();
    let evidence = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        evidence_of_step,
    );
    view! {
        <section class="page">
            <Suspense fallback=|| view! { <p>"Loading the evidence…"</p> }>
                {move || Suspend::new(async move {
                    match evidence.await {
                        Ok(e) => view! { <Evidence e /> }.into_any(),
                        Err(ConsoleError::SignIn { .. }) => {
                            view! { <p><A href="/sign-in">"Sign in"</A>" to see this step."</p> }.into_any()
                        }
                        Err(ConsoleError::NotFound) => {
                            view! { <h1>"No such step"</h1> }.into_any()
                        }
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn Evidence(e: StepEvidence) -> impl IntoView {
    let permitted = e.permitted.clone();
    view! {
        <h1>{format!("{} · {}", e.creation_key, e.logical)}</h1>
        <p>
            <span class=format!("badge {:?}", e.state).to_lowercase()>{e.state.label()}</span>
            {e.open_incident.then(|| view! { <span class="badge incident">"Open integrity incident"</span> })}
        </p>
        <h2>"Evidence"</h2>
        <dl class="facts">
            <dt>"Intended document digest"</dt><dd><code>{e.document_digest}</code></dd>
            <dt>"Definition version · logical step"</dt><dd>{format!("v{} · {}", e.definition_version, e.logical)}</dd>
            <dt>"Request key"</dt><dd><code data-testid="request-key">{e.request_key}</code></dd>
            <dt>"Request digest"</dt><dd><code>{e.input_digest}</code></dd>
            <dt>"Adapter call first began · last began"</dt><dd>{format!("{} · {}", e.first_sent, e.last_sent)}</dd>
            <dt>"Outcome unknown since"</dt><dd>{e.unknown_since}</dd>
            <dt>"Receipt"</dt>
            <dd data-testid="receipt">{e.receipt.unwrap_or_else(|| "none: no receipt proves the effect".into())}</dd>
            <dt>"Adapter and capabilities"</dt>
            <dd>{format!("{} — {}", e.adapter, e.capabilities)}</dd>
            <dt>"Deadline · visibility window"</dt>
            <dd>{format!("{} ms · {} ms", e.deadline_ms, e.visibility_window_ms)}</dd>
        </dl>
        <details>
            <summary>"Canonical request (redacted)"</summary>
            <pre>{e.request_summary}</pre>
        </details>
        <table class="queue">
            <caption>"Attempts (never overwritten)"</caption>
            <thead>
                <tr>
                    <th scope="col">"#"</th>
                    <th scope="col">"Worker · lease until"</th>
                    <th scope="col">"Started · call began · ended"</th>
                    <th scope="col">"Outcome"</th>
                    <th scope="col">"Transport observation"</th>
                </tr>
            </thead>
            <tbody>
                {e.attempts
                    .into_iter()
                    .map(|a| view! {
                        <tr data-attempt=a.id>
                            <td class="num">{a.number}</td>
                            <td>{a.worker}<br /><span class="muted small">{a.lease_until}</span></td>
                            <td class="small">{a.started}<br />{a.call_began}<br />{a.ended}</td>
                            <td>{a.outcome}</td>
                            <td class="small">{a.observation}</td>
                        </tr>
                    })
                    .collect_view()}
            </tbody>
        </table>
        <table class="queue">
            <caption>"Timeline: observations, lookups, operator actions"</caption>
            <tbody>
                {e.timeline
                    .into_iter()
                    .map(|(at, what, detail)| view! {
                        <tr>
                            <td class="small">{at}</td>
                            <td>{what}</td>
                            <td class="small"><code>{detail}</code></td>
                        </tr>
                    })
                    .collect_view()}
            </tbody>
        </table>
        <h2>"What the adapter's contract permits"</h2>
        {if permitted.is_empty() {
            view! { <p class="muted">"Nothing: the engine is still working on this step, or it is settled."</p> }.into_any()
        } else {
            view! {
                <ul data-testid="permitted">
                    {permitted.into_iter().map(|a| view! { <li>{a.label()}</li> }).collect_view()}
                </ul>
            }
                .into_any()
        }}
    }
}
