use engine::domain::WorkflowState;
use serde::{Deserialize, Serialize};

/// How many workflows are in one state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: WorkflowState,
    pub count: i64,
}
