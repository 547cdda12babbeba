use engine::domain::{OperatorAction, StepState};
use serde::{Deserialize, Serialize};

use crate::forms::KeptForm;

/// One row of a preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviewItem {
    pub step_id: String,
    pub creation_key: String,
    pub state: StepState,
    pub adapter: String,
    pub version: i64,
    pub refusal: Option<String>,
}

/// The rows a filter selects now, judged for one action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkPreview {
    pub action: OperatorAction,
    pub rows: Vec<PreviewItem>,
    /// More rows matched than a run may take; narrow the filter.
    pub more: bool,
    pub csrf: String,
    /// The run this session last tried to start here and the server refused, as typed.
    pub kept: Option<KeptForm>,
}

/// A run's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunView {
    pub action: String,
    pub author: String,
    pub reason: String,
    pub rate_per_sec: i32,
    pub finished: bool,
    /// Who stopped it and why, when it was stopped.
    pub stopped: Option<String>,
    /// The form token, when this operator may stop the run (its author or an approver, while
    /// it goes on).
    pub stop_csrf: Option<String>,
    /// step id, creation key, outcome ("pending", "done", "refused", "failed"), message.
    pub items: Vec<(String, String, String, String)>,
}
