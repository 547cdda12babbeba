use engine::domain::StepState;
use serde::{Deserialize, Serialize};

use crate::incidents::list::OpenIncidents;

/// A step waiting for certainty, as the queue lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueItem {
    pub step_id: String,
    pub workflow_id: String,
    pub creation_key: String,
    pub logical: String,
    pub state: StepState,
    pub adapter: String,
    pub capabilities: String,
    /// Seconds since the outcome became unknown (or review was first needed).
    pub unknown_age_secs: i64,
    pub attempts: i32,
    pub request_key: String,
    pub open_incident: bool,
    /// A note was left on the step or its workflow.
    pub noted: bool,
    /// What the workflow's customer reads about this step (delivery steps only).
    pub sentence: Option<String>,
}

/// A step of a workflow found by search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoundStep {
    pub step_id: String,
    pub creation_key: String,
    pub logical: String,
    pub state: StepState,
    pub adapter: String,
    pub request_key: String,
    pub external_reference: String,
}

/// What the queue's filters narrow to (as the query string carries them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueQuery {
    pub state: Option<String>,
    pub adapter: Option<String>,
    pub definition: Option<String>,
    /// Minutes.
    pub older_than: Option<String>,
    /// "today", "week" or "any": only steps with a note written since then.
    pub noted: Option<String>,
    pub q: Option<String>,
    pub after: Option<String>,
}

/// One page of the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePage {
    pub items: Vec<QueueItem>,
    /// The oldest open incidents and how many are open (on the first page; none after it).
    pub incidents: OpenIncidents,
    /// The keyset cursor of the next page, when there is one.
    pub next: Option<String>,
    /// Waiting steps by state and adapter, before filtering.
    pub by_state: Vec<(StepState, i64)>,
    pub by_adapter: Vec<(String, i64)>,
    /// The workflow definitions this engine runs.
    pub definitions: Vec<String>,
    /// Search results, when the query had a search.
    pub found: Option<Vec<FoundStep>>,
    /// Open alerts: rule, subject, seconds open.
    pub alerts: Vec<(String, String, i64)>,
}
