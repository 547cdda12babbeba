//! One action form of the step page: an island. Without JavaScript it is a plain form that
//! posts, and the server's answer (a redirect back to the page) carries the outcome. Live, it
//! posts in place: a refusal shows beside the button with everything still typed, and a done
//! action loads the step page it led to, which says what it did.

use engine::domain::OperatorAction;
use leptos::prelude::*;
use leptos::server_fn::ServerFn;

use super::api::ActOnStep;
use super::types::ActionFormData;
use crate::forms::kept_or;

/// Whether `action` changes what happens at the destination irreversibly or risks doing it twice.
pub fn is_danger(action: OperatorAction) -> bool {
    matches!(
        action,
        OperatorAction::Waive
            | OperatorAction::AuthorizeAnotherAttempt
            | OperatorAction::Cancel
            | OperatorAction::Replace
    )
}

/// The form of one permitted action: the fields it needs, a reason, a button.
///
/// Its `on:submit` reads the posted fields itself rather than through `<ActionForm>`, whose
/// generic decoding of a form (serde_qs) was a third of this island's wasm (docs/DESIGN.md §18).
#[island(lazy)]
pub fn StepActionForm(form: ActionFormData) -> impl IntoView {
    let act = ServerAction::<ActOnStep>::new();
    // The server answers a done action with a redirect to the step page it led to.
    let _ = leptos::server_fn::redirect::set_redirect_hook(|to: &str| {
        let _ = window().location().set_href(to);
    });
    // A form whose fields cannot be read here posts as it would without JavaScript.
    let submit = move |ev: leptos::ev::SubmitEvent| {
        if let Ok(posted) = leptos::form::form_data_from_event(&ev) {
            ev.prevent_default();
            act.dispatch(posted_action(&|name| posted.get(name).as_string()));
        }
    };
    Effect::new(move |_| crate::live::island_ready());
    let kept_refusal = form.kept.as_ref().and_then(|kept| kept.sentence());
    // Until this island posts, the only outcome is the refusal the server kept for this form.
    let outcome = move || {
        let refusal = if act.version().get() == 0 {
            kept_refusal.clone()
        } else {
            act.value()
                .get()
                .and_then(Result::err)
                .map(|e| e.to_string())
        };
        refusal
            .map(|r| view! { <p class="notice error" role="alert" data-testid="refusal">{r}</p> })
    };
    let danger = is_danger(form.action);
    let reason = kept_or(&form.kept, "reason", "");
    view! {
        <form action=ActOnStep::url() method="post" class="stack" on:submit=submit>
            <input type="hidden" name="csrf" value=form.csrf.clone() />
            <input type="hidden" name="step" value=form.step.clone() />
            <input type="hidden" name="version" value=form.version.clone() />
            <input type="hidden" name="action" value=form.action.name() />
            <Fields form=form.clone() />
            <label>"Reason (recorded in the audit log)"
                <textarea name="reason" required rows="2">{reason}</textarea>
            </label>
            {outcome}
            <button type="submit" class=if danger { "danger" } else { "primary" } disabled=move || act.pending().get()>
                {form.action.label()}
            </button>
        </form>
    }
}

/// The arguments of [`ActOnStep`] as a form posts them, `field` giving each one's value.
fn posted_action(field: &dyn Fn(&str) -> Option<String>) -> ActOnStep {
    let text = |name: &str| field(name).unwrap_or_default();
    ActOnStep {
        step: text("step"),
        version: text("version"),
        action: text("action"),
        reason: text("reason"),
        csrf: text("csrf"),
        external_reference: field("external_reference"),
        evidence: field("evidence"),
        residual_uncertainty: field("residual_uncertainty"),
        acknowledge_duplicate_risk: field("acknowledge_duplicate_risk"),
        corrected_input: field("corrected_input"),
    }
}

/// The fields `form`'s action asks for besides the reason, refilled from a refused post.
#[component]
fn Fields(form: ActionFormData) -> impl IntoView {
    let kept = |name: &str, default: &str| kept_or(&form.kept, name, default);
    match form.action {
        OperatorAction::AttachEvidence => view! {
            <label>"External reference at the destination"
                <input type="text" name="external_reference" required maxlength="200" value=kept("external_reference", "") />
            </label>
            <label>"Evidence (what you saw, and where)"
                <textarea name="evidence" required rows="2">{kept("evidence", "")}</textarea>
            </label>
        }
        .into_any(),
        OperatorAction::Waive => view! {
            <label>"Residual uncertainty (what remains unknown)"
                <textarea name="residual_uncertainty" required rows="2">{kept("residual_uncertainty", &form.residual_uncertainty)}</textarea>
            </label>
        }
        .into_any(),
        OperatorAction::AuthorizeAnotherAttempt => {
            let acknowledged = form
                .kept
                .as_ref()
                .is_some_and(|k| k.field("acknowledge_duplicate_risk").is_some());
            view! {
                <label class="check">
                    <input type="checkbox" name="acknowledge_duplicate_risk" value="yes" required checked=acknowledged />
                    {form.acknowledgement.clone()}
                </label>
            }
            .into_any()
        }
        OperatorAction::Replace => view! {
            <p class="small">"Current input digest: " <code>{form.input_digest.clone()}</code></p>
            <label>"Corrected input (JSON; the new digest shows on both steps)"
                <textarea name="corrected_input" rows="8" class="code">{kept("corrected_input", &form.input)}</textarea>
            </label>
        }
        .into_any(),
        // A reason is all these ask for; incidents are resolved on their own page.
        OperatorAction::CheckDestination
        | OperatorAction::RetrySameKey
        | OperatorAction::Cancel
        | OperatorAction::ResolveIncident => ().into_any(),
    }
}
