use engine::domain::{OperatorAction, StepState};
use serde::{Deserialize, Serialize};

use crate::forms::KeptForm;

/// One claim of the adapter as the page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimLine {
    pub label: String,
    /// `verified`, `unverified` or `refuted`.
    pub trust: String,
    /// What proved it, the contradiction, or why it stays unverified.
    pub evidence: String,
}

/// One attempt as the page shows it (never overwritten).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptView {
    pub number: i32,
    pub id: String,
    pub worker: String,
    pub started: String,
    pub call_began: String,
    pub ended: String,
    pub outcome: String,
    pub observation: String,
}

/// The evidence of one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepEvidence {
    pub step_id: String,
    pub workflow_id: String,
    pub creation_key: String,
    pub logical: String,
    pub definition_version: i32,
    pub state: StepState,
    pub adapter: String,
    pub capabilities: String,
    /// A verified idempotency key speaks for this step's request: a same-key retry is replayed.
    pub keyed: bool,
    pub visibility_window_ms: u64,
    pub deadline_ms: u64,
    pub content_digest: String,
    /// How the adapter's version was verified, or why it sends nothing.
    pub trust: String,
    /// Each claim of the adapter's current version: only verified ones count.
    pub claims: Vec<ClaimLine>,
    pub request_key: String,
    pub input_digest: String,
    pub request_summary: String,
    pub first_sent: String,
    pub last_sent: String,
    pub unknown_since: String,
    /// What `unknown_since` measures in this state: an unknown outcome, a rejection, a step
    /// not sent.
    pub waiting_since_label: String,
    pub receipt: Option<String>,
    pub attempts: Vec<AttemptView>,
    pub timeline: Vec<(String, String, String)>,
    pub open_incident: bool,
    /// What the adapter's contract permits here and the signed-in role may do, by the one
    /// decision function.
    pub permitted: Vec<OperatorAction>,
    /// The step's version; every action form carries it, so a stale page is refused.
    pub version: String,
    /// Set while a worker or another operator's lookup holds the step.
    pub busy: Option<String>,
    /// Whether the archive keeps a copy of the workflow, noted when reconciling after a restore
    /// (docs/DESIGN.md §21, "After a restore").
    pub archived_copy: bool,
    /// What the last action taken in this session did.
    pub notice: Option<String>,
    /// The input the step runs on (pretty JSON) and its digest.
    pub input: String,
    pub step_input_digest: String,
    pub replaces: Option<String>,
    pub replaced_by: Option<String>,
    pub withdraws: Option<String>,
    pub incidents: Vec<String>,
    /// The workflow's other steps: id, label, state.
    pub siblings: Vec<(String, String, StepState)>,
    pub attempt_count: usize,
    pub subject: String,
    /// What the step's effect is called (its definition's words), lower case.
    pub noun: String,
    /// The session's CSRF token, which every action form carries.
    pub csrf: String,
    /// What the contract permits here but the signed-in role does not.
    pub beyond_role: Vec<OperatorAction>,
    /// The action form this session last posted here and the server refused, as typed.
    pub kept: Option<KeptForm>,
    /// The form that leaves a note on the step (shown in its timeline).
    pub note: crate::notes::types::NoteForm,
    /// The actions here that need two approvers, by the adapter's file (docs/DESIGN.md §20).
    pub four_eyes: Vec<OperatorAction>,
    /// The proposal waiting for a second approver.
    pub proposal: Option<super::proposal::ProposalView>,
}

/// One action form as the step page draws it (the props of its island): the fields every form
/// carries, what the action's own fields start with, and what a refused post had typed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionFormData {
    pub action: OperatorAction,
    pub step: String,
    /// The step's version when the page was drawn; a post from an older page is refused.
    pub version: String,
    pub csrf: String,
    /// What the residual uncertainty starts with (Waive).
    pub residual_uncertainty: String,
    /// The words of the duplicate-risk acknowledgement (Authorize another attempt).
    pub acknowledgement: String,
    /// The step's input (pretty JSON) and its digest (Replace; empty for the others).
    pub input: String,
    pub input_digest: String,
    /// What the operator had typed into this form when the server refused it.
    pub kept: Option<KeptForm>,
}

/// What an action did: a sentence, and the step page to show next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionDone {
    pub message: String,
    pub step_id: String,
}
