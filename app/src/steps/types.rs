use engine::domain::{OperatorAction, StepState};
use serde::{Deserialize, Serialize};

/// One attempt as the page shows it (never overwritten).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptView {
    pub number: i32,
    pub id: String,
    pub worker: String,
    pub lease_until: String,
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
    pub visibility_window_ms: u64,
    pub deadline_ms: u64,
    pub document_digest: String,
    pub request_key: String,
    pub input_digest: String,
    pub request_summary: String,
    pub first_sent: String,
    pub last_sent: String,
    pub unknown_since: String,
    pub receipt: Option<String>,
    pub attempts: Vec<AttemptView>,
    pub timeline: Vec<(String, String, String)>,
    pub open_incident: bool,
    /// What the adapter's contract permits here, by the one decision function.
    pub permitted: Vec<OperatorAction>,
}
