use engine::domain::OperatorAction;
use leptos::prelude::*;
use leptos_router::components::A;
use leptos_router::hooks::{use_params_map, use_query_map};

use leptos::server_fn::ServerFn;

use super::api::{MAX_ROWS, StartBulk, bulk_run, preview_bulk};
use super::live::LiveProgress;
use super::types::BulkPreview;
use crate::error::ConsoleError;
use crate::forms::kept_or;

/// `/bulk`: a filter and an action; then the exact rows, and a run over the permitted ones.
#[component]
pub fn BulkPage() -> impl IntoView {
    let query = use_query_map();
    let field = move |name: &str| query.read_untracked().get(name).unwrap_or_default();
    let preview = Resource::new(
        move || {
            let q = query.read();
            (
                q.get("state"),
                q.get("adapter"),
                q.get("definition"),
                q.get("older_than"),
                q.get("action"),
            )
        },
        |(state, adapter, definition, older_than, action)| async move {
            match action.filter(|a| !a.is_empty()) {
                None => Ok(None),
                Some(action) => preview_bulk(state, adapter, definition, older_than, action)
                    .await
                    .map(Some),
            }
        },
    );
    view! {
        <section class="page">
            <h1>"Bulk recovery"</h1>
            <p class="muted">
                "Select steps by filter and see the exact rows first. The run acts only on the rows shown, at the rate you set, and each row is judged by its adapter's contract as a single action would be: rows it refuses are listed and skipped."
            </p>
            <form method="get" action="/bulk" class="filters">
                <label>"Action"
                    <select name="action" required>
                        <option value="">"choose…"</option>
                        {engine::domain::actions::BULK_ACTIONS
                            .into_iter()
                            .map(|a| {
                                let selected = field("action") == a.name();
                                view! { <option value=a.name() selected=selected>{a.label()}</option> }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>"State" <input type="text" name="state" value=field("state") placeholder="e.g. review_required" /></label>
                <label>"Adapter" <input type="text" name="adapter" value=field("adapter") /></label>
                <label>"Definition" <input type="text" name="definition" value=field("definition") /></label>
                <label>"Waiting for more than (min)" <input type="number" name="older_than" min="0" value=field("older_than") /></label>
                <button type="submit">"Preview"</button>
            </form>
            <Suspense fallback=|| view! { <p>"Selecting…"</p> }>
                {move || Suspend::new(async move {
                    match preview.await {
                        Ok(None) => ().into_any(),
                        Ok(Some(p)) => view! { <Preview p /> }.into_any(),
                        Err(ConsoleError::SignIn { .. }) => {
                            view! { <p><A href="/sign-in">"Sign in"</A>" to run bulk recovery."</p> }.into_any()
                        }
                        Err(error) => view! { <p class="notice error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}

/// The exact rows, and the form that starts a run over the permitted ones (a plain form: a
/// run's page follows either way; a refused start comes back here with what was typed).
#[component]
fn Preview(p: BulkPreview) -> impl IntoView {
    let kept = |name: &str, default: &str| kept_or(&p.kept, name, default);
    let (reason, rate, residual) = (
        kept("reason", ""),
        kept("rate", "5"),
        kept("residual_uncertainty", ""),
    );
    let refusal = p.kept.as_ref().and_then(|k| k.sentence());
    let permitted: Vec<String> = p
        .rows
        .iter()
        .filter(|r| r.refusal.is_none())
        .map(|r| format!("{}:{}", r.step_id, r.version))
        .collect();
    let count = permitted.len();
    let refused = p.rows.len() - count;
    let action = p.action;
    view! {
        <p data-testid="bulk-count">
            {format!(
                "{} row(s) selected: {count} permitted for {}, {refused} refused by their contract (skipped).",
                p.rows.len(),
                action.label()
            )}
        </p>
        {p.more.then(|| view! {
            <p class="notice warn">{format!("More than {MAX_ROWS} rows match; only the first {MAX_ROWS} are shown and can run. Narrow the filter for the rest.")}</p>
        })}
        <table class="queue" data-testid="bulk-rows">
            <thead>
                <tr><th scope="col">"Workflow"</th><th scope="col">"State"</th><th scope="col">"Adapter"</th><th scope="col">"This action"</th></tr>
            </thead>
            <tbody>
                {p.rows
                    .into_iter()
                    .map(|r| view! {
                        <tr>
                            <td><A href=format!("/steps/{}", r.step_id)>{r.creation_key}</A></td>
                            <td>{r.state.label()}</td>
                            <td>{r.adapter}</td>
                            <td class="small">{r.refusal.unwrap_or_else(|| "permitted".into())}</td>
                        </tr>
                    })
                    .collect_view()}
            </tbody>
        </table>
        {refusal.map(|e| view! { <p class="notice error" role="alert" data-testid="refusal">{e}</p> })}
        {(count > 0).then(|| view! {
            <form method="post" action=StartBulk::url() class="stack action danger">
                <input type="hidden" name="csrf" value=p.csrf.clone() />
                <input type="hidden" name="action" value=action.name() />
                <input type="hidden" name="rows" value=permitted.join(",") />
                {(action == OperatorAction::Waive).then(|| view! {
                    <label>"Residual uncertainty (named on every waiver)"
                        <textarea name="residual_uncertainty" required rows="2">{residual.clone()}</textarea>
                    </label>
                })}
                <label>"Rate (steps per second)" <input type="number" name="rate" min="1" max="100" value=rate.clone() required /></label>
                <label>"Reason (recorded in the audit log for every row)"
                    <textarea name="reason" required rows="2">{reason.clone()}</textarea>
                </label>
                <button type="submit" class="danger">{format!("{} on these {count} row(s)", action.label())}</button>
            </form>
        })}
    }
}

/// `/bulk/:id`: a run's progress, row by row; the live page follows it until it finishes
/// (an island), and without JavaScript a link reloads it.
#[component]
pub fn BulkRunPage() -> impl IntoView {
    let params = use_params_map();
    let run = Resource::new(
        move || params.read().get("id").unwrap_or_default(),
        |id| async move { bulk_run(id.clone()).await.map(|r| (id, r)) },
    );
    view! {
        <section class="page">
            <Suspense fallback=|| view! { <p>"Loading the run…"</p> }>
                {move || Suspend::new(async move {
                    match run.await {
                        Ok((id, run)) => view! { <LiveProgress id run /> }.into_any(),
                        Err(ConsoleError::NotFound) => view! { <h1>"No such run"</h1> }.into_any(),
                        Err(error) => view! { <p class="error">{error.to_string()}</p> }.into_any(),
                    }
                })}
            </Suspense>
        </section>
    }
}
