//! A proposal waiting on a step for its second approver (docs/DESIGN.md §20): who proposed
//! what and why, until when, and — for an approver who did not propose it — the plain forms
//! that confirm or decline it.

use leptos::prelude::*;
use leptos::server_fn::ServerFn;
use serde::{Deserialize, Serialize};

use crate::error::ConsoleError;
use crate::forms::{KeptForm, kept_or};

/// A waiting proposal as the step page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposalView {
    pub id: String,
    /// The action's label ("Waive").
    pub action: String,
    pub proposed_by: String,
    pub proposed_at: String,
    pub reason: String,
    /// What the action carries besides a reason, in words (the residual uncertainty).
    pub carries: Option<String>,
    pub expires_at: String,
    pub expired: bool,
    /// The signed-in person may decide it: an approver who did not propose it.
    pub may_decide: bool,
    pub csrf: String,
    /// This session's last refused decision on it, as typed.
    pub kept: Option<KeptForm>,
}

/// The proposal `p` as `operator` sees it.
#[cfg(feature = "ssr")]
pub fn view_of(
    p: engine::store::proposal::Proposal,
    operator: &engine::operators::Operator,
    csrf: String,
    kept: Option<KeptForm>,
) -> ProposalView {
    let at = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
    ProposalView {
        id: p.id.to_string(),
        action: p.action.label().to_owned(),
        carries: match (
            p.params["residual_uncertainty"].as_str(),
            p.params["canonical"].as_str(),
        ) {
            (Some(r), _) => Some(format!("Residual uncertainty: {r}")),
            (None, Some(c)) => Some(format!(
                "{c} stands; the other effects are accepted as unresolved."
            )),
            (None, None) => None,
        },
        expired: p.expires_at <= chrono::Utc::now(),
        may_decide: operator.role >= engine::domain::Role::Approver
            && operator.username != p.proposed_by,
        proposed_at: at(p.proposed_at),
        expires_at: at(p.expires_at),
        proposed_by: p.proposed_by,
        reason: p.reason,
        csrf,
        kept: kept.filter(|k| k.field("proposal") == Some(p.id.to_string().as_str())),
    }
}

/// Confirms (`decision` = "confirm") or declines proposal `proposal` as the signed-in approver.
#[server(prefix = "/fn")]
pub async fn decide_proposal(
    proposal: String,
    decision: String,
    reason: String,
    csrf: String,
) -> Result<String, ConsoleError> {
    use crate::auth::api::session;
    use engine::recovery::four_eyes;

    let (operator, current, pool) = session::acting(&csrf).await?;
    let id = uuid::Uuid::parse_str(&proposal).map_err(|_| ConsoleError::NotFound.answered())?;
    let done = match decision.as_str() {
        "confirm" => four_eyes::confirm(&pool, &operator, id, &reason).await,
        _ => four_eyes::decline(&pool, &operator, id, &reason).await,
    }
    .map_err(|e| ConsoleError::from(e).answered())?;
    session::set_notice(&current, &done.message).await?;
    leptos_axum::redirect(&format!("/steps/{}", done.step));
    Ok(done.message)
}

/// The waiting proposal, and its forms for a second approver.
#[component]
pub fn ProposalCard(p: ProposalView) -> impl IntoView {
    let refusal = p.kept.as_ref().and_then(KeptForm::sentence);
    let standing = if p.expired {
        format!(
            "Expired at {} unanswered: propose the action again.",
            p.expires_at
        )
    } else {
        format!("Waits for a second approver until {}.", p.expires_at)
    };
    let form = (p.may_decide && !p.expired).then(|| {
        view! {
            <form method="post" action=DecideProposal::url() class="stack action" data-testid="decide-form">
                <input type="hidden" name="csrf" value=p.csrf.clone() />
                <input type="hidden" name="proposal" value=p.id.clone() />
                <label>"Your reason (recorded in the audit log and in what is done)"
                    <input type="text" name="reason" required value=kept_or(&p.kept, "reason", "") />
                </label>
                <button type="submit" name="decision" value="confirm" class="danger">{format!("Confirm: {}", p.action)}</button>
                <button type="submit" name="decision" value="decline">"Decline"</button>
            </form>
        }
    });
    view! {
        <section class="card notice warn" data-testid="proposal" data-proposal=p.id.clone()>
            <h2>{format!("Proposed: {}", p.action)}</h2>
            <p>{format!("By {} at {}: {}", p.proposed_by, p.proposed_at, p.reason)}</p>
            {p.carries.map(|c| view! { <p class="small">{c}</p> })}
            <p class="small" data-testid="proposal-standing">{standing}</p>
            {refusal.map(|r| view! { <p class="notice error" role="alert" data-testid="refusal">{r}</p> })}
            {form}
            {(!p.may_decide).then(|| view! {
                <p class="muted small">"A different approver confirms or declines it."</p>
            })}
        </section>
    }
}
