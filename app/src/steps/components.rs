use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use engine::domain::{OperatorAction, StepState};

use super::api::{ActOnStep, evidence_of_step};
use super::types::StepEvidence;
use crate::error::ConsoleError;

/// `/steps/:id`: evidence at the top, what the contract permits below it.
#[component]
pub fn StepPage() -> impl IntoView {
    let params = use_params_map();
    let act = ServerAction::<ActOnStep>::new();
    provide_context(act);
    let evidence = Resource::new(
        move || {
            (
                params.read().get("id").unwrap_or_default(),
                act.version().get(),
            )
        },
        |(id, _)| evidence_of_step(id),
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
    let open_incident = e.incidents.first().cloned();
    let context = ActionContext {
        step: e.step_id.clone(),
        version: e.version.clone(),
        state: e.state,
        capabilities: e.capabilities.clone(),
        attempts: e.attempt_count,
        subject: e.subject.clone(),
        noun: e.noun.clone(),
        request_key: e.request_key.clone(),
        input: e.input.clone(),
        input_digest: e.step_input_digest.clone(),
        window_ms: e.visibility_window_ms,
        csrf: e.csrf.clone(),
    };
    let incident_links = e
        .incidents
        .clone()
        .into_iter()
        .map(|id| view! { <li><A href=format!("/incidents/{id}")>{format!("Incident {}", &id[..8])}</A></li> })
        .collect_view();
    let siblings = e
        .siblings
        .clone()
        .into_iter()
        .map(|(id, label, state)| {
            view! { <li><A href=format!("/steps/{id}")>{label}</A>" — "{state.label()}</li> }
        })
        .collect_view();
    view! {
        <h1>{format!("{} · {}", e.creation_key, e.logical)}</h1>
        <ActionResult step=e.step_id.clone() notice=e.notice.clone() />
        <p>
            <span class=format!("badge {:?}", e.state).to_lowercase() data-testid="state">{e.state.label()}</span>
            {e.open_incident.then(|| view! { <span class="badge incident">"Open integrity incident"</span> })}
        </p>
        <h2>"Evidence"</h2>
        <dl class="facts">
            <dt>"Content digest the destination compares"</dt><dd><code>{e.content_digest}</code></dd>
            <dt>"Definition version · logical step"</dt><dd>{format!("v{} · {}", e.definition_version, e.logical)}</dd>
            <dt>"Input digest"</dt><dd><code data-testid="input-digest">{e.step_input_digest.clone()}</code></dd>
            <dt>"Request key"</dt><dd><code data-testid="request-key">{e.request_key.clone()}</code></dd>
            <dt>"Request digest"</dt><dd><code>{e.input_digest}</code></dd>
            <dt>"Adapter call first began · last began"</dt><dd>{format!("{} · {}", e.first_sent, e.last_sent)}</dd>
            <dt>"Outcome unknown since"</dt><dd>{e.unknown_since}</dd>
            <dt>"Receipt"</dt>
            <dd data-testid="receipt">{e.receipt.unwrap_or_else(|| "none: no receipt proves the effect".into())}</dd>
            <dt>"Adapter and capabilities"</dt>
            <dd>{format!("{} — {}", e.adapter, e.capabilities)}</dd>
            <dt>"How the contract was verified"</dt>
            <dd data-testid="trust">
                {e.trust.clone()}
                {(!e.proven_claims.is_empty()).then(|| view! {
                    <ul class="claims" data-testid="proven-claims">
                        {e.proven_claims.clone().into_iter().map(|c| view! { <li>{format!("Proven: {c}")}</li> }).collect_view()}
                    </ul>
                })}
            </dd>
            <dt>"Deadline · visibility window"</dt>
            <dd>{format!("{} ms · {} ms", e.deadline_ms, e.visibility_window_ms)}</dd>
            {e.withdraws.map(|r| view! { <dt>"Withdraws"</dt><dd><code>{r}</code></dd> })}
            {e.replaces.map(|id| view! {
                <dt>"Replaces"</dt>
                <dd data-testid="replaces"><A href=format!("/steps/{id}")>"the original step"</A></dd>
            })}
            {e.replaced_by.map(|id| view! {
                <dt>"Replaced by"</dt>
                <dd data-testid="replaced-by"><A href=format!("/steps/{id}")>"its replacement"</A></dd>
            })}
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
                            <td>{a.worker}</td>
                            <td class="small">{a.started}<br />{a.call_began}<br />{a.ended}</td>
                            <td>{a.outcome}</td>
                            <td class="small">{a.observation}</td>
                        </tr>
                    })
                    .collect_view()}
            </tbody>
        </table>
        <table class="queue" data-testid="timeline">
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
        <nav class="related" aria-label="Related">
            <p><A href=format!("/workflows/{}", e.workflow_id)>"The workflow"</A>" · "
               <A href=format!("/status/{}", e.workflow_id)>"What the customer sees"</A></p>
            <ul>{siblings}</ul>
            <ul>{incident_links}</ul>
        </nav>
        <h2>"What the adapter's contract permits"</h2>
        {e.busy.map(|b| view! { <p class="notice warn" data-testid="busy">{b}</p> })}
        {(!e.beyond_role.is_empty()).then(|| {
            let names: Vec<String> = e
                .beyond_role
                .iter()
                .map(|a| format!("{} ({})", a.label(), format!("{:?}", a.required_role()).to_lowercase()))
                .collect();
            view! {
                <p class="muted" data-testid="beyond-role">
                    "The contract also permits, for a role above yours: " {names.join(", ")} "."
                </p>
            }
        })}
        {if permitted.is_empty() {
            view! { <p class="muted" data-testid="nothing-permitted">"Nothing: the engine is still working on this step, or it is settled."</p> }.into_any()
        } else {
            view! {
                <div class="actions" data-testid="permitted">
                    {permitted
                        .into_iter()
                        .map(|a| match a {
                            // Resolution lives on the incident's page, with its references.
                            OperatorAction::ResolveIncident => {
                                view! { <IncidentLink incident=open_incident.clone() /> }.into_any()
                            }
                            a => view! { <ActionCard action=a context=context.clone() /> }.into_any(),
                        })
                        .collect_view()}
                </div>
            }
                .into_any()
        }}
    }
}

/// What an action card needs to know about its step.
#[derive(Clone)]
struct ActionContext {
    step: String,
    version: String,
    state: StepState,
    capabilities: String,
    attempts: usize,
    subject: String,
    noun: String,
    request_key: String,
    input: String,
    input_digest: String,
    window_ms: u64,
    csrf: String,
}

/// The outcome of the last action taken on this page: what it did, or why it was refused.
/// In the live page the action's own answer says it (the page it led to may be another
/// step's); without JavaScript the notice kept in the session across the redirect does.
#[component]
fn ActionResult(step: String, notice: Option<String>) -> impl IntoView {
    let act = expect_context::<ServerAction<ActOnStep>>();
    let done = |message: String| {
        view! { <p class="notice ok" role="status" data-testid="notice">{message}</p> }.into_any()
    };
    move || {
        match act.value().get() {
        Some(Err(error)) => {
            view! { <p class="notice error" role="alert" data-testid="refusal">{error.to_string()}</p> }
                .into_any()
        }
        Some(Ok(answer)) if answer.step_id == step => done(answer.message),
        _ => notice.clone().map(done).into_any(),
    }
    }
}

const RESOLVE_EXPLAINED: &str =
    "Open the incident to name the canonical result and the duplicate's disposition.";

/// "Resolve incident", offered as the way to the incident's page: resolving names the
/// canonical reference among the incident's, which only that page lists.
#[component]
fn IncidentLink(incident: Option<String>) -> impl IntoView {
    let href = incident.map_or_else(|| "/".to_owned(), |id| format!("/incidents/{id}"));
    view! {
        <section class="action" data-action="resolve_incident">
            <h3>{OperatorAction::ResolveIncident.label()}</h3>
            <p class="small">{RESOLVE_EXPLAINED}</p>
            <A href=href>"Open the incident to resolve it"</A>
        </section>
    }
}

/// One permitted action: what it does and risks, the fields it needs, a reason, a button.
/// A plain form that posts without JavaScript; the server re-checks everything.
#[component]
fn ActionCard(action: OperatorAction, context: ActionContext) -> impl IntoView {
    let act = expect_context::<ServerAction<ActOnStep>>();
    let name = action.name();
    let data_action = name;
    let danger = matches!(
        action,
        OperatorAction::Waive
            | OperatorAction::AuthorizeAnotherAttempt
            | OperatorAction::Cancel
            | OperatorAction::Replace
    );
    let fields = match action {
        OperatorAction::AttachEvidence => view! {
            <label>"External reference at the destination"
                <input type="text" name="external_reference" required maxlength="200" />
            </label>
            <label>"Evidence (what you saw, and where)"
                <textarea name="evidence" required rows="2"></textarea>
            </label>
        }
        .into_any(),
        OperatorAction::Waive => view! {
            <label>"Residual uncertainty (what remains unknown)"
                <textarea name="residual_uncertainty" required rows="2">
                    {format!("Whether the {} for {} happened; no receipt proves it.", context.noun, context.subject)}
                </textarea>
            </label>
        }
        .into_any(),
        OperatorAction::AuthorizeAnotherAttempt => view! {
            <label class="check">
                <input type="checkbox" name="acknowledge_duplicate_risk" value="yes" required />
                {format!("I understand that the {} for {} may happen twice.", context.noun, context.subject)}
            </label>
        }
        .into_any(),
        OperatorAction::Replace => view! {
            <p class="small">"Current input digest: " <code>{context.input_digest.clone()}</code></p>
            <label>"Corrected input (JSON; the new digest shows on both steps)"
                <textarea name="corrected_input" rows="8" class="code">{context.input.clone()}</textarea>
            </label>
        }
        .into_any(),
        // A reason is all these ask for.
        OperatorAction::CheckDestination
        | OperatorAction::RetrySameKey
        | OperatorAction::Cancel
        | OperatorAction::ResolveIncident => ().into_any(),
    };
    view! {
        <section class=if danger { "action danger" } else { "action" } data-action=data_action>
            <h3>{action.label()}</h3>
            <p class="small">{explain(action, &context)}</p>
            <ActionForm action=act attr:class="stack">
                <input type="hidden" name="csrf" value=context.csrf.clone() />
                <input type="hidden" name="step" value=context.step.clone() />
                <input type="hidden" name="version" value=context.version.clone() />
                <input type="hidden" name="action" value=name />
                {fields}
                <label>"Reason (recorded in the audit log)"
                    <textarea name="reason" required rows="2"></textarea>
                </label>
                <button type="submit" class=if danger { "danger" } else { "primary" }>
                    {action.label()}
                </button>
            </ActionForm>
        </section>
    }
}

/// What the action will do to this step, and what it risks, in a sentence or two.
fn explain(action: OperatorAction, c: &ActionContext) -> String {
    match action {
        OperatorAction::CheckDestination => format!(
            "Asks the destination whether it holds request {}. Found: the step succeeds with a status-query receipt. Not found within the {} ms visibility window proves nothing yet.",
            c.request_key, c.window_ms
        ),
        OperatorAction::RetrySameKey => format!(
            "Sends again under the same request key {} and the same bytes; the contract makes the destination answer with the original delivery if it has one.",
            c.request_key
        ),
        OperatorAction::AttachEvidence => "Records a receipt from evidence you found elsewhere (a support desk, the destination's own console). Dependants then proceed.".into(),
        OperatorAction::Waive => "Accepts that this step's outcome stays unknown, naming what is unknown. Only dependants that accept a waiver proceed.".into(),
        OperatorAction::AuthorizeAnotherAttempt => format!(
            "Duplicate risk: this adapter ({}) cannot prove whether the earlier {} attempt(s) took effect. Another attempt may make the effect a second time for {}.",
            c.capabilities, c.attempts, c.subject
        ),
        OperatorAction::Cancel => match c.state {
            StepState::Blocked | StepState::Ready => "Stops the step before any call: the effect will not happen.".into(),
            StepState::Succeeded => "The destination holds this delivery: cancelling requests its withdrawal as a step of its own, which may itself end unknown.".into(),
            StepState::Running
            | StepState::Invoking
            | StepState::OutcomeUnknown
            | StepState::ReviewRequired
            | StepState::Waived
            | StepState::Rejected
            | StepState::Cancelled => "Stops every further attempt and check. The earlier attempt's effect may still have happened; cancelling does not undo it.".into(),
        },
        OperatorAction::Replace => "Creates a replacement step with a new request key linked to this one, on the input below. This step keeps its history.".into(),
        OperatorAction::ResolveIncident => RESOLVE_EXPLAINED.into(),
    }
}
