use engine::domain::StepState;
use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::use_params_map;

use leptos::server_fn::ServerFn;

use super::api::{PauseWorkflow, ResumeWorkflow, customer_status, workflow_steps};
use super::types::{StepRow, WorkflowData};
use crate::error::ConsoleError;
use crate::forms::kept_or;
use crate::notes::components::{AddNoteForm, NoteList};

/// What a step still waits for, in words.
fn waits_for(step: &StepRow, all: &[StepRow]) -> String {
    if step.state != StepState::Blocked {
        return String::new();
    }
    let missing: Vec<String> = step
        .depends_on
        .iter()
        .filter(|dep| {
            !all.iter().any(|s| {
                &s.logical == *dep && matches!(s.state, StepState::Succeeded | StepState::Waived)
            })
        })
        .map(|dep| format!("a receipt from {dep}"))
        .collect();
    if missing.is_empty() {
        "the duplicate incident on its dependency to be resolved".into()
    } else {
        missing.join(", ")
    }
}

/// `/workflows/:id`: every step (replacements and withdrawals included), and what the
/// blocked ones wait for.
#[component]
pub fn WorkflowPage() -> impl IntoView {
    let params = use_params_map();
    let data = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        workflow_steps,
    );
    view! {
        <section class="page">
            <Suspense fallback=|| view! { <p>"Loading the workflow…"</p> }>
                {move || Suspend::new(async move {
                    match data.await {
                        Ok(w) => {
                            let all = w.steps.clone();
                            let archived = w.archived.is_some();
                            let pause = view! { <Pause w=w.clone() /> };
                            let notes = match w.archived.clone() {
                                None => view! {
                                    <h2>"Notes"</h2>
                                    <NoteList notes=w.notes.clone() />
                                    <AddNoteForm on="workflow" id=w.id.clone() form=w.note.clone() />
                                }
                                    .into_any(),
                                Some(when) => {
                                    view! { <Archived when evidence=w.evidence.clone() testid="archived" /> }
                                        .into_any()
                                }
                            };
                            let copy = w
                                .copy
                                .clone()
                                .map(|when| view! { <Archived when evidence=w.evidence.clone() testid="archived-copy" /> });
                            view! {
                                <h1>{format!("Workflow {}", w.creation_key)}</h1>
                                <p>
                                    {format!("{} · {} · ", w.definition, w.state)}
                                    <span data-testid="status">{w.status}</span>
                                    " · " <A href=format!("/status/{}", w.id)>"The customer's status page"</A>
                                </p>
                                {pause}
                                <Steps steps=w.steps.clone() all archived />
                                {copy}
                                {notes}
                            }
                                .into_any()
                        }
                        Err(ConsoleError::SignIn { .. }) => {
                            view! { <p><A href="/sign-in">"Sign in"</A>" to see this workflow."</p> }.into_any()
                        }
                        Err(ConsoleError::NotFound) => view! { <h1>"No such workflow"</h1> }.into_any(),
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

/// The workflow's steps: each with its state, attempts, keys and what it waits for; linked to
/// its page unless the workflow was archived.
#[component]
fn Steps(steps: Vec<StepRow>, all: Vec<StepRow>, archived: bool) -> impl IntoView {
    view! {
        <table class="queue" data-testid="steps">
            <thead>
                <tr>
                    <th scope="col">"Step"</th>
                    <th scope="col">"State"</th>
                    <th scope="col" class="num">"Attempts"</th>
                    <th scope="col">"Request key · external reference"</th>
                    <th scope="col">"Waits for"</th>
                </tr>
            </thead>
            <tbody>
                {steps
                    .iter()
                    .map(|s| {
                        let label = if s.generation > 0 && !s.logical.ends_with(".withdrawal") {
                            format!("{} (replacement {})", s.logical, s.generation)
                        } else {
                            s.logical.clone()
                        };
                        let name = if archived {
                            label.into_any()
                        } else {
                            view! { <A href=format!("/steps/{}", s.id)>{label}</A> }.into_any()
                        };
                        view! {
                            <tr>
                                <td>{name}</td>
                                <td>{s.state.label()}</td>
                                <td class="num">{s.attempts}</td>
                                <td class="small"><code>{s.request_key.clone()}</code><br />{s.external_reference.clone()}</td>
                                <td class="small">{waits_for(s, &all)}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
}

/// An archived workflow, or the archive's copy of one back hot: when it was written, and its
/// evidence as the record holds it.
#[component]
fn Archived(when: String, evidence: Vec<String>, testid: &'static str) -> impl IntoView {
    view! {
        <p class="notice" data-testid=testid>{when}</p>
        <h2>"Evidence"</h2>
        <ul data-testid="evidence">
            {evidence.into_iter().map(|line| view! { <li class="small">{line}</li> }).collect_view()}
        </ul>
    }
}

/// A workflow's pause: the notice of the last action, the pause in force, and the plain form
/// that pauses or resumes it (it comes back to this page, with the refusal if there is one).
#[component]
fn Pause(w: WorkflowData) -> impl IntoView {
    let refusal = w
        .kept
        .as_ref()
        .and_then(|k| k.sentence())
        .map(|e| view! { <p class="notice error" role="alert" data-testid="refusal">{e}</p> });
    let reason = kept_or(&w.kept, "reason", "");
    let (action, legend, button) = if w.paused.is_some() {
        (
            ResumeWorkflow::url(),
            "Resume: its held steps go back to the queue",
            "Resume workflow",
        )
    } else {
        (
            PauseWorkflow::url(),
            "Pause: no step of it starts until it is resumed; calls in flight settle",
            "Pause workflow",
        )
    };
    view! {
        {w.notice.map(|n| view! { <p class="notice ok" role="status" data-testid="notice">{n}</p> })}
        {refusal}
        {w.paused.map(|p| view! { <p class="notice warn" data-testid="paused">{p}</p> })}
        {w.may_pause.then(|| view! {
            <form method="post" action=action class="stack action" data-testid="pause-form">
                <input type="hidden" name="csrf" value=w.csrf.clone() />
                <input type="hidden" name="workflow" value=w.id.clone() />
                <label>{legend}" — reason (recorded in the audit log)"
                    <input type="text" name="reason" required value=reason />
                </label>
                <button type="submit">{button}</button>
            </form>
        })}
    }
}

/// `/status/:id`: the page a workflow's customer reads, in the words of docs/DESIGN.md §14.
#[component]
pub fn StatusPage() -> impl IntoView {
    let params = use_params_map();
    let status = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        customer_status,
    );
    view! {
        <section class="page narrow">
            <Suspense fallback=|| view! { <p>"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match status.await {
                        Ok((sentence, updated)) => view! {
                            <h1>"Delivery status"</h1>
                            <p class="status-sentence" data-testid="customer-status">{sentence}</p>
                            <p class="muted small">{format!("Last change: {updated}")}</p>
                        }
                            .into_any(),
                        Err(ConsoleError::NotFound) => view! { <h1>"No such request"</h1> }.into_any(),
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}
