use engine::domain::{StepState, WorkflowState};
use serde::{Deserialize, Serialize};

/// How many workflows are in one state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: WorkflowState,
    pub count: i64,
}

/// Step outcomes per logical step, duplicates, and how long unknown outcomes have waited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes {
    /// (logical step, state, steps).
    pub by_step: Vec<(String, StepState, i64)>,
    pub duplicates_open: i64,
    pub duplicates_resolved: i64,
    /// Under a minute, under 10 min, under an hour, under a day, older.
    pub unknown_age: [i64; 5],
}
