// A server function takes one argument per form field; the action form has ten.
#![allow(clippy::too_many_arguments)]

use leptos::prelude::*;

use super::types::{ActionDone, StepEvidence};
use crate::error::ConsoleError;

/// The evidence of step `id`.
#[server(prefix = "/fn")]
pub async fn evidence_of_step(id: String) -> Result<StepEvidence, ConsoleError> {
    let operator = crate::auth::api::session::require(engine::domain::Role::Viewer).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let id = uuid::Uuid::parse_str(&id).map_err(|_| ConsoleError::NotFound.answered())?;
    let (notice, csrf, kept) = from_session(id).await?;
    let mut e = engine::read::evidence::evidence(&pool, id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound.answered())?;
    let (four_eyes, proposal) = four_eyes_of(&mut e, &operator, &csrf).await?;
    let (permitted, beyond_role): (Vec<_>, Vec<_>) = e
        .permitted_actions()
        .into_iter()
        .partition(|a| operator.role.may(*a));
    let (subject, noun, trust, claims) = facts_of(&e);
    let waiting_since_label = waiting_since_label(e.state);
    let contract = e.contract.as_ref();
    Ok(StepEvidence {
        version: e.version.to_string(),
        busy: e.leased_until.map(busy_sentence),
        archived_copy: engine::store::archive::copy_place(&pool, e.workflow_id)
            .await?
            .is_some(),
        notice,
        input: serde_json::to_string_pretty(&e.input).unwrap_or_default(),
        step_input_digest: e.step_input_digest,
        replaces: e.replaces.map(|s| s.to_string()),
        replaced_by: e.replaced_by.map(|s| s.to_string()),
        withdraws: e.withdraws,
        incidents: e.incidents.iter().map(ToString::to_string).collect(),
        siblings: e.siblings.into_iter().map(sibling).collect(),
        attempt_count: e.attempts.len(),
        subject,
        noun,
        csrf,
        beyond_role,
        step_id: e.step_id.to_string(),
        workflow_id: e.workflow_id.to_string(),
        creation_key: e.creation_key,
        logical: e.logical,
        definition_version: e.definition_version,
        state: e.state,
        adapter: e.adapter.unwrap_or_else(|| "— (a pure step)".into()),
        capabilities: contract
            .map(|c| c.capabilities_summary())
            .unwrap_or_default(),
        keyed: contract.is_some_and(|c| c.accepts_idempotency_key),
        visibility_window_ms: contract.map_or(0, |c| c.visibility_window_ms),
        deadline_ms: contract.map_or(0, |c| c.deadline_ms),
        content_digest: e
            .content_digest
            .unwrap_or_else(|| "— (not prepared yet)".into()),
        trust,
        claims,
        request_key: e
            .request_key
            .unwrap_or_else(|| "— (not prepared yet)".into()),
        input_digest: e.input_digest.unwrap_or_else(|| "—".into()),
        request_summary: e
            .request_summary
            .map(|s| serde_json::to_string_pretty(&s).unwrap_or_default())
            .unwrap_or_else(|| "—".into()),
        first_sent: evidence_time(e.first_sent_at),
        last_sent: evidence_time(e.last_sent_at),
        unknown_since: evidence_time(e.unknown_since),
        waiting_since_label,
        receipt: e.receipt.map(receipt_line),
        attempts: e.attempts.into_iter().map(attempt_view).collect(),
        timeline: e
            .timeline
            .into_iter()
            .map(|t| (evidence_time(Some(t.at)), t.what, t.detail))
            .collect(),
        open_incident: e.open_incident,
        permitted,
        kept,
        note: crate::notes::api::note_form(&operator, id).await?,
        four_eyes,
        proposal,
    })
}

/// What needs two approvers here, and the proposal waiting for its second one.
#[cfg(feature = "ssr")]
async fn four_eyes_of(
    e: &mut engine::read::evidence::Evidence,
    operator: &engine::operators::Operator,
    csrf: &str,
) -> Result<
    (
        Vec<engine::domain::OperatorAction>,
        Option<super::proposal::ProposalView>,
    ),
    ConsoleError,
> {
    use leptos::server_fn::ServerFn;
    let kept = crate::auth::api::session::take_form(super::proposal::DecideProposal::PATH).await?;
    let four_eyes = e
        .trust
        .as_ref()
        .map(|t| t.four_eyes.clone())
        .unwrap_or_default();
    let proposal = e
        .proposal
        .take()
        .map(|p| super::proposal::view_of(p, operator, csrf.to_owned(), kept));
    Ok((four_eyes, proposal))
}

/// What the session carries to step `step`'s page: what the last action did, the CSRF token,
/// and the action form for this step it last posted and had refused, as typed.
#[cfg(feature = "ssr")]
async fn from_session(
    step: uuid::Uuid,
) -> Result<(Option<String>, String, Option<crate::forms::KeptForm>), ConsoleError> {
    use crate::auth::api::session;
    use leptos::server_fn::ServerFn;

    let current = session::current().await?;
    let notice = session::take_notice(&current).await?;
    let csrf = session::csrf_token(&current).await?;
    let kept = session::take_form(ActOnStep::PATH)
        .await?
        .filter(|kept| kept.field("step") == Some(step.to_string().as_str()));
    Ok((notice, csrf, kept))
}

/// The receipt as the page says it: reference, how it was obtained, when.
#[cfg(feature = "ssr")]
fn receipt_line(
    (method, reference, at): (String, String, chrono::DateTime<chrono::Utc>),
) -> String {
    format!(
        "{reference}, by {}, observed {}",
        method.replace('_', " "),
        evidence_time(Some(at))
    )
}

/// A moment as the evidence page prints it, to the millisecond; `—` when it has not happened.
#[cfg(feature = "ssr")]
fn evidence_time(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
        .unwrap_or_else(|| "—".into())
}

/// Whom the workflow acts on, what the step's effect is called, how its adapter was verified,
/// and each claim's trust.
#[cfg(feature = "ssr")]
fn facts_of(
    e: &engine::read::evidence::Evidence,
) -> (String, String, String, Vec<super::types::ClaimLine>) {
    let (subject, noun) = acts_on(e);
    (subject, noun, trust_of(e), claims_of(e))
}

/// What the step's waiting time measures, in its state's words, capitalised for the page.
#[cfg(feature = "ssr")]
fn waiting_since_label(state: engine::domain::StepState) -> String {
    let label = state.waiting_since_label();
    let mut chars = label.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Whom the step's workflow acts on, and what its effect is called (lower case).
#[cfg(feature = "ssr")]
fn acts_on(e: &engine::read::evidence::Evidence) -> (String, String) {
    let subject = match e.subject.as_str() {
        "" => "the recipient".to_owned(),
        subject => subject.to_owned(),
    };
    (subject, e.noun.to_lowercase())
}

/// How the step's adapter version was verified, in a sentence; and when the request was sent
/// under another version, that none of this one's claims speak for it.
#[cfg(feature = "ssr")]
fn trust_of(e: &engine::read::evidence::Evidence) -> String {
    let Some(trust) = e.trust.as_ref() else {
        return "— (a pure step)".into();
    };
    match e.sent_version {
        Some(sent) if sent != trust.version => format!(
            "{} This request was sent under version {sent}: what version {} proved says nothing about it, so only the actions that rest on no claim about it are offered.",
            trust.sentence(),
            trust.version
        ),
        _ => trust.sentence(),
    }
}

/// Each claim of the step's adapter, with its trust and evidence.
#[cfg(feature = "ssr")]
fn claims_of(e: &engine::read::evidence::Evidence) -> Vec<super::types::ClaimLine> {
    e.trust
        .iter()
        .flat_map(|t| &t.claims)
        .map(|c| super::types::ClaimLine {
            label: c.claim.label(),
            trust: c.trust.label().to_owned(),
            evidence: c.evidence.clone(),
        })
        .collect()
}

/// Why actions wait while a lease is held.
#[cfg(feature = "ssr")]
fn busy_sentence(until: chrono::DateTime<chrono::Utc>) -> String {
    format!(
        "A worker (or another operator's lookup) is handling this step until {}; actions wait until it lets go.",
        until.format("%H:%M:%S UTC")
    )
}

/// Another step of the workflow: its id, its label (replacements numbered) and its state.
#[cfg(feature = "ssr")]
fn sibling(
    (id, logical, generation, state): (uuid::Uuid, String, i32, engine::domain::StepState),
) -> (String, String, engine::domain::StepState) {
    let label = if generation > 0 {
        format!("{logical} (replacement {generation})")
    } else {
        logical
    };
    (id.to_string(), label, state)
}

/// One attempt as the page shows it.
#[cfg(feature = "ssr")]
fn attempt_view(a: engine::read::evidence::AttemptEvidence) -> super::types::AttemptView {
    super::types::AttemptView {
        number: a.number,
        id: a.id.to_string(),
        worker: a.worker,
        started: evidence_time(Some(a.started_at)),
        call_began: evidence_time(a.invoked_at),
        ended: evidence_time(a.ended_at),
        outcome: a.outcome.map_or("in progress", |o| o.label()).to_owned(),
        observation: a.observation.unwrap_or_default(),
    }
}

/// Takes `action` on step `step`, as the page at `version` offered it. The server decides
/// again, under a row lock, whether the role and the adapter's contract permit it now.
#[server(prefix = "/fn")]
pub async fn act_on_step(
    step: String,
    version: String,
    action: String,
    reason: String,
    csrf: String,
    external_reference: Option<String>,
    evidence: Option<String>,
    residual_uncertainty: Option<String>,
    acknowledge_duplicate_risk: Option<String>,
    corrected_input: Option<String>,
) -> Result<ActionDone, ConsoleError> {
    use crate::auth::api::session;
    use engine::recovery::{self, Action, Request};

    let (operator, current, pool) = session::acting(&csrf).await?;
    let step = uuid::Uuid::parse_str(&step).map_err(|_| ConsoleError::NotFound.answered())?;
    let seen = version.parse::<i64>().map_err(|_| {
        ConsoleError::Conflict {
            reason: "This form carries no valid step version; reload the page.".into(),
        }
        .answered()
    })?;
    let action = match action.as_str() {
        "check_destination" => Action::CheckDestination,
        "retry_same_key" => Action::RetrySameKey,
        "attach_evidence" => Action::AttachEvidence {
            external_reference: external_reference.unwrap_or_default(),
            evidence: evidence.unwrap_or_default(),
        },
        "waive" => Action::Waive {
            residual_uncertainty: residual_uncertainty.unwrap_or_default(),
        },
        "authorize_another_attempt" => Action::AuthorizeAnotherAttempt {
            acknowledged_duplicate_risk: acknowledge_duplicate_risk.is_some_and(|v| !v.is_empty()),
        },
        "cancel" => Action::Cancel,
        "replace" => Action::Replace {
            corrected_input: match corrected_input.as_deref().map(str::trim) {
                None | Some("") => None,
                Some(text) => Some(serde_json::from_str(text).map_err(|e| {
                    ConsoleError::Invalid {
                        reason: format!("The corrected input is not JSON: {e}."),
                    }
                    .answered()
                })?),
            },
        },
        other => {
            return Err(ConsoleError::Invalid {
                reason: format!("`{other}` is not an action the console knows."),
            }
            .answered());
        }
    };
    let done = recovery::perform(
        &pool,
        Request {
            operator: &operator,
            step,
            seen_version: Some(seen),
            reason: &reason,
            action,
        },
    )
    .await
    .map_err(|e| ConsoleError::from(e).answered())?;
    session::set_notice(&current, &done.message).await?;
    leptos_axum::redirect(&format!("/steps/{}", done.step));
    Ok(ActionDone {
        message: done.message,
        step_id: done.step.to_string(),
    })
}
