use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use leptos_router::components::A;

use super::api::{HoldAdapter, LimitAdapter, ResumeAdapter, adapters};
use super::types::{AdapterRow, AdaptersView};
use crate::error::ConsoleError;
use crate::forms::{KeptForm, kept_or};

/// `/adapters`: every adapter, what verification proved of its claims, whether it may send,
/// and its hold; an approver holds or resumes it here (plain forms, which come back to this
/// page).
#[component]
pub fn AdaptersPage() -> impl IntoView {
    let listed = Resource::new(|| (), |_| adapters());
    view! {
        <section class="page">
            <h1>"Adapters"</h1>
            <Suspense fallback=|| view! { <p>"Loading the adapters…"</p> }>
                {move || Suspend::new(async move {
                    match listed.await {
                        Ok(view) => view! { <Adapters view /> }.into_any(),
                        Err(ConsoleError::SignIn { .. }) => {
                            view! { <p><A href="/sign-in">"Sign in"</A>" to see the adapters."</p> }.into_any()
                        }
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

#[component]
fn Adapters(view: AdaptersView) -> impl IntoView {
    let refusal = view
        .kept
        .as_ref()
        .and_then(|k| k.sentence())
        .map(|e| view! { <p class="notice error" role="alert" data-testid="refusal">{e}</p> });
    let AdaptersView {
        adapters,
        may_hold,
        csrf,
        notice,
        kept,
    } = view;
    view! {
        {notice.map(|n| view! { <p class="notice ok" role="status" data-testid="notice">{n}</p> })}
        {refusal}
        <p class="muted">
            "While an adapter is held no new request leaves for it from any worker: its claimed steps wait held, unsent and uncounted; calls already in flight settle as they would. Its limits (requests a second, calls in flight) hold across every worker process: steps beyond them wait their turn in the queue. Holding, resuming and limiting need the approver role."
        </p>
        {adapters
            .into_iter()
            .map(|a| view! { <Adapter a may_hold csrf=csrf.clone() kept=kept.clone() /> })
            .collect_view()}
    }
}

#[component]
fn Adapter(a: AdapterRow, may_hold: bool, csrf: String, kept: Option<KeptForm>) -> impl IntoView {
    // A refused form comes back filled in only under the adapter it was posted for.
    let kept = kept.filter(|k| k.field("adapter") == Some(a.name.as_str()));
    let reason = kept_or(&kept, "reason", "");
    let sending = match (&a.held, a.verified) {
        (Some(_), _) => "held: sends nothing new",
        (None, true) => "sends: its current version passed verification",
        (None, false) => "sends nothing: its current version is not verified",
    };
    let form = may_hold.then(|| match a.held {
        Some(_) => view! {
            <form method="post" action=ResumeAdapter::url() class="stack action" data-testid="resume-form">
                <input type="hidden" name="csrf" value=csrf.clone() />
                <input type="hidden" name="adapter" value=a.name.clone() />
                <label>"Reason (recorded in the audit log)"
                    <input type="text" name="reason" required value=reason.clone() />
                </label>
                <label>"Ramp: held steps a second, oldest first (empty: all at once)"
                    <input type="number" name="per_second" min="0.1" step="any" value=kept_or(&kept, "per_second", "") />
                </label>
                <button type="submit">{format!("Resume {}", a.name)}</button>
            </form>
        }
        .into_any(),
        None => view! {
            <form method="post" action=HoldAdapter::url() class="stack action danger" data-testid="hold-form">
                <input type="hidden" name="csrf" value=csrf.clone() />
                <input type="hidden" name="adapter" value=a.name.clone() />
                <label>"Reason (recorded in the audit log)"
                    <input type="text" name="reason" required value=reason.clone() />
                </label>
                <label class="check">
                    <input type="checkbox" name="lookups" value="go" checked=kept_or(&kept, "lookups", "") == "go" />
                    "Let status lookups go on (they change nothing at the provider)"
                </label>
                <button type="submit" class="danger">{format!("Hold {}", a.name)}</button>
            </form>
        }
        .into_any(),
    });
    let limit_form = may_hold.then(|| {
        view! { <LimitForm adapter=a.name.clone() shown=a.limit_shown.clone() csrf kept /> }
    });
    view! {
        <article class="card" data-testid="adapter" data-adapter=a.name.clone()>
            <h2>{a.name.clone()}</h2>
            <p>{format!("{} · {} · ", a.kind, a.capabilities)}<span data-testid="sending">{sending}</span></p>
            {a.held.map(|h| view! { <p class="notice warn" data-testid="held">{h}</p> })}
            {(!a.tripped_by.is_empty()).then(|| view! {
                <table class="queue small" data-testid="tripped-by">
                    <caption>"The attempts that tripped the breaker, newest first"</caption>
                    <tbody>
                        {a.tripped_by
                            .into_iter()
                            .map(|(at, seen, step)| view! {
                                <tr>
                                    <td>{at}</td>
                                    <td>{seen}</td>
                                    <td><A href=format!("/steps/{step}")>"the step"</A></td>
                                </tr>
                            })
                            .collect_view()}
                    </tbody>
                </table>
            })}
            {a.breaker.map(|b| view! { <p class="muted small" data-testid="breaker">{b}</p> })}
            {a.limits.map(|l| view! { <p class="small" data-testid="limits">{l}</p> })}
            <p class="muted small" data-testid="held-steps">{format!("{} steps wait held", a.held_steps)}</p>
            <ul class="small">
                {a.claims
                    .into_iter()
                    .map(|(claim, trust)| view! { <li>{format!("{claim}: {trust}")}</li> })
                    .collect_view()}
            </ul>
            {form}
            {limit_form}
        </article>
    }
}

/// An approver's override of the adapter's limits, or its end.
#[component]
fn LimitForm(
    adapter: String,
    shown: String,
    csrf: String,
    kept: Option<KeptForm>,
) -> impl IntoView {
    let posted_here = kept
        .as_ref()
        .is_some_and(|k| k.field("per_second").is_some() || k.field("in_flight").is_some());
    let kept = kept.filter(|_| posted_here);
    let overridden = shown != super::types::NO_OVERRIDE;
    view! {
        <form method="post" action=LimitAdapter::url() class="stack action" data-testid="limit-form">
            <input type="hidden" name="csrf" value=csrf />
            <input type="hidden" name="adapter" value=adapter.clone() />
            <input type="hidden" name="shown" value=shown />
            <label>"Requests a second, at most (empty: its file's)"
                <input type="number" name="per_second" min="0.01" step="any" value=kept_or(&kept, "per_second", "") />
            </label>
            <label>"Calls in flight, at most (empty: its file's)"
                <input type="number" name="in_flight" min="1" step="1" value=kept_or(&kept, "in_flight", "") />
            </label>
            <label>"Why limit (recorded in the audit log)"
                <input type="text" name="reason" required value=kept_or(&kept, "reason", "") />
            </label>
            <button type="submit">{format!("Limit {adapter}")}</button>
            {overridden.then(|| view! {
                <button type="submit" name="clear" value="yes">"Clear the override"</button>
            })}
        </form>
    }
}
