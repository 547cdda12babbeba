use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use engine::domain::{OperatorAction, StepState};

use super::api::evidence_of_step;
use super::form::{StepActionForm, is_danger};
use super::proposal::ProposalCard;
use super::types::{ActionFormData, StepEvidence};
use crate::error::ConsoleError;
use crate::forms::KeptForm;
use crate::notes::components::AddNoteForm;
use crate::scripts::{PageScripts, STEP_FORM_ISLAND};

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
                    // The wasm loads only where an action's form (the island) is drawn; its
                    // scripts come first, so the browser asks for them before the evidence.
                    let (page, island) = match evidence.await {
                        Ok(e) => {
                            let island = offers_a_form(&e.permitted).then_some(STEP_FORM_ISLAND);
                            (view! { <Evidence e /> }.into_any(), island)
                        }
                        Err(ConsoleError::SignIn { .. }) => {
                            (view! { <p><A href="/sign-in">"Sign in"</A>" to see this step."</p> }.into_any(), None)
                        }
                        Err(ConsoleError::NotFound) => {
                            (view! { <h1>"No such step"</h1> }.into_any(), None)
                        }
                        Err(error) => (view! { <p class="error">{error.to_string()}</p> }.into_any(), None),
                    };
                    view! { <PageScripts island /> {page} }
                })}
            </Suspense>
        </section>
    }
}

/// Whether any of `permitted` is drawn as a form ([`StepActionForm`]): every action but the
/// incident's resolution, which links to the incident's page.
fn offers_a_form(permitted: &[OperatorAction]) -> bool {
    permitted
        .iter()
        .any(|a| *a != OperatorAction::ResolveIncident)
}

#[component]
fn Evidence(e: StepEvidence) -> impl IntoView {
    let permitted = e.permitted.clone();
    let open_incident = e.incidents.first().cloned();
    // A refused post is drawn again in its own form; one for an action no longer offered here
    // is said at the top, with what was written.
    let offered = |kept: &KeptForm| {
        permitted
            .iter()
            .any(|a| Some(a.name()) == kept.field("action"))
    };
    let (kept, unoffered) = match e.kept.clone() {
        Some(kept) if offered(&kept) => (Some(kept), None),
        other => (None, other),
    };
    let context = ActionContext {
        step: e.step_id.clone(),
        version: e.version.clone(),
        state: e.state,
        capabilities: e.capabilities.clone(),
        keyed: e.keyed,
        attempts: e.attempt_count,
        subject: e.subject.clone(),
        noun: e.noun.clone(),
        request_key: e.request_key.clone(),
        input: e.input.clone(),
        input_digest: e.step_input_digest.clone(),
        window_ms: e.visibility_window_ms,
        csrf: e.csrf.clone(),
        kept,
        four_eyes: e.four_eyes.clone(),
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
        {e.notice.clone().map(|n| view! { <p class="notice ok" role="status" data-testid="notice">{n}</p> })}
        {unoffered.map(|kept| view! { <Unoffered kept /> })}
        <p>
            <span class=format!("badge {:?}", e.state).to_lowercase() data-testid="state">{e.state.label()}</span>
            {e.open_incident.then(|| view! { <span class="badge incident">"Open integrity incident"</span> })}
        </p>
        {e.archived_copy.then(|| view! {
            <p class="notice warn" data-testid="archived-copy">
                "The archive holds a copy of this workflow written while the database still holds it (a restore from an older backup, or archiving that stopped before removing it). It may hold what the database does not, such as this call's receipt: "
                <A href=format!("/workflows/{}", e.workflow_id)>"compare it on the workflow page"</A>" before acting."
            </p>
        })}
        <h2>"Evidence"</h2>
        <dl class="facts">
            <dt>"Content digest the destination compares"</dt><dd><code>{e.content_digest}</code></dd>
            <dt>"Definition version · logical step"</dt><dd>{format!("v{} · {}", e.definition_version, e.logical)}</dd>
            <dt>"Input digest"</dt><dd><code data-testid="input-digest">{e.step_input_digest.clone()}</code></dd>
            <dt>"Request key"</dt><dd><code data-testid="request-key">{e.request_key.clone()}</code></dd>
            <dt>"Request digest"</dt><dd><code>{e.input_digest}</code></dd>
            <dt>"Adapter call first began · last began"</dt><dd>{format!("{} · {}", e.first_sent, e.last_sent)}</dd>
            <dt>{e.waiting_since_label}</dt><dd data-testid="waiting-since">{e.unknown_since}</dd>
            <dt>"Receipt"</dt>
            <dd data-testid="receipt">{e.receipt.unwrap_or_else(|| "none: no receipt proves the effect".into())}</dd>
            <dt>"Adapter and capabilities"</dt>
            <dd>{format!("{} — {}", e.adapter, e.capabilities)}</dd>
            <dt>"What verification proved"</dt>
            <dd data-testid="trust">
                {e.trust.clone()}
                {(!e.claims.is_empty()).then(|| view! {
                    <ul class="claims" data-testid="claims">
                        {e.claims.clone().into_iter().map(|c| view! {
                            <li class=format!("claim {}", c.trust) data-trust=c.trust.clone()>
                                <strong>{format!("{}: {}", c.label, c.trust)}</strong>
                                {(c.trust != "verified").then(|| format!(" — {}", c.evidence))}
                            </li>
                        }).collect_view()}
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
        <AddNoteForm on="step" id=e.step_id.clone() form=e.note.clone() />
        <nav class="related" aria-label="Related">
            <p><A href=format!("/workflows/{}", e.workflow_id)>"The workflow"</A>" · "
               <A href=format!("/status/{}", e.workflow_id)>"What the customer sees"</A></p>
            <ul>{siblings}</ul>
            <ul>{incident_links}</ul>
        </nav>
        {e.proposal.map(|p| view! { <ProposalCard p /> })}
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
    keyed: bool,
    attempts: usize,
    subject: String,
    noun: String,
    request_key: String,
    input: String,
    input_digest: String,
    window_ms: u64,
    csrf: String,
    /// The refused post of one of this page's actions, as typed.
    kept: Option<KeptForm>,
    /// The actions that need two approvers here.
    four_eyes: Vec<OperatorAction>,
}

/// A refusal of an action this page no longer offers (the step moved on, or the role changed),
/// with what the operator had written, so none of it is lost.
#[component]
fn Unoffered(kept: KeptForm) -> impl IntoView {
    let written: Vec<(String, String)> = kept
        .fields
        .iter()
        .filter(|(name, value)| {
            !["step", "version", "action"].contains(&name.as_str()) && !value.trim().is_empty()
        })
        .cloned()
        .collect();
    view! {
        <div class="notice error" role="alert" data-testid="refusal">
            <p>{kept.sentence().unwrap_or_default()}</p>
            {(!written.is_empty()).then(|| view! {
                <p>{format!("What you had written for {}:", kept.value("action").replace('_', " "))}</p>
                <dl class="facts" data-testid="kept">
                    {written
                        .into_iter()
                        .map(|(name, value)| view! { <dt>{name.replace('_', " ")}</dt><dd>{value}</dd> })
                        .collect_view()}
                </dl>
            })}
        </div>
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

/// One permitted action: what it does and risks (server-rendered), then its form (an island).
/// The server re-checks everything the form carries.
#[component]
fn ActionCard(action: OperatorAction, context: ActionContext) -> impl IntoView {
    let kept = context
        .kept
        .clone()
        .filter(|k| k.field("action") == Some(action.name()));
    let replaces = action == OperatorAction::Replace;
    let form = ActionFormData {
        action,
        step: context.step.clone(),
        version: context.version.clone(),
        csrf: context.csrf.clone(),
        residual_uncertainty: format!(
            "Whether the {} for {} happened; no receipt proves it.",
            context.noun, context.subject
        ),
        acknowledgement: format!(
            "I understand that the {} for {} may happen twice.",
            context.noun, context.subject
        ),
        input: if replaces {
            context.input.clone()
        } else {
            String::new()
        },
        input_digest: if replaces {
            context.input_digest.clone()
        } else {
            String::new()
        },
        kept,
    };
    view! {
        <section class=if is_danger(action) { "action danger" } else { "action" } data-action=action.name()>
            <h3>{action.label()}</h3>
            <p class="small">{explain(action, &context)}</p>
            {context.four_eyes.contains(&action).then(|| view! {
                <p class="small" data-testid="four-eyes">"Needs two approvers: this proposes it, and a different approver confirms or declines it."</p>
            })}
            <StepActionForm form />
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
        OperatorAction::RetrySameKey if c.state == StepState::Unsent => format!(
            "Sends again under the same request key {}: no earlier attempt took effect (none reached the destination, or it answered that it committed nothing), so sending cannot make the effect a second time.",
            c.request_key
        ),
        OperatorAction::RetrySameKey if c.keyed => format!(
            "Sends again under the same request key {} and the same bytes; verification proved that the destination answers a repeated key with the original delivery, if it has one.",
            c.request_key
        ),
        OperatorAction::RetrySameKey => format!(
            "Sends again under the same reference {}: the destination's lookup, asked after its visibility window, found nothing under it, so no earlier attempt took effect.",
            c.request_key
        ),
        OperatorAction::AttachEvidence => "Records a receipt from evidence you found elsewhere (a support desk, the destination's own console). Dependants then proceed.".into(),
        OperatorAction::Waive => "Accepts that this step's outcome stays unknown, naming what is unknown. Only dependants that accept a waiver proceed.".into(),
        OperatorAction::AuthorizeAnotherAttempt => format!(
            "Duplicate risk: this adapter ({}) cannot prove whether the earlier {} attempt(s) took effect. Another attempt may make the effect a second time for {}.",
            c.capabilities, c.attempts, c.subject
        ),
        OperatorAction::Cancel => match c.state {
            StepState::Blocked | StepState::Ready | StepState::Held | StepState::Unsent => "Stops the step before any call: the effect will not happen.".into(),
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
