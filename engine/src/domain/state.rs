use serde::{Deserialize, Serialize};

/// Where a durable user intent stands, as the engine records it.
///
/// Mirrors the PostgreSQL enum `workflow_state`; a new variant must break every exhaustive match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "workflow_state", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowState {
    /// Intent is recorded; no step has started.
    Pending,
    /// At least one step has started and none needs a person.
    Running,
    /// A step's outcome is unknown or an integrity incident is open: a person must look.
    NeedsReview,
    /// Every step holds the receipt its dependants require.
    Completed,
    /// Stopped on request; what already happened outside stays recorded.
    Cancelled,
}

impl WorkflowState {
    /// Every state, in the order the console lists them.
    pub const ALL: [WorkflowState; 5] = [
        WorkflowState::Pending,
        WorkflowState::Running,
        WorkflowState::NeedsReview,
        WorkflowState::Completed,
        WorkflowState::Cancelled,
    ];

    /// The short label people see for this state.
    pub fn label(self) -> &'static str {
        match self {
            WorkflowState::Pending => "Pending",
            WorkflowState::Running => "Running",
            WorkflowState::NeedsReview => "Needs review",
            WorkflowState::Completed => "Completed",
            WorkflowState::Cancelled => "Cancelled",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_a_distinct_label() {
        let mut labels: Vec<_> = WorkflowState::ALL.iter().map(|s| s.label()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), WorkflowState::ALL.len());
    }
}
