use serde::{Deserialize, Serialize};

/// Where a durable user intent stands, as the engine records it.
///
/// Mirrors the PostgreSQL enum `workflow_state`; a new variant must break every exhaustive match.
/// Which one a workflow is in is the database's rule, `workflow_state_of` (docs/DESIGN.md §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type, utoipa::ToSchema))]
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

/// Where one logical step stands. Mirrors the PostgreSQL enum `step_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type, utoipa::ToSchema))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "step_state", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    /// Waiting for the receipt fields it requires from the steps it depends on.
    Blocked,
    /// May be claimed by a worker.
    Ready,
    /// Claimed, but its adapter may send nothing now (its version is not verified): it waits,
    /// unsent and uncounted, until the adapter may send again (docs/DESIGN.md §5).
    Held,
    /// Leased by a worker that has not yet persisted a request identity.
    Running,
    /// The request identity is durable and the call may be in flight.
    Invoking,
    /// The call's outcome is unknown and automatic recovery (replay or query) is under way.
    OutcomeUnknown,
    /// The outcome cannot be verified automatically: a person must decide.
    ReviewRequired,
    /// Every attempt failed before any effect and no further automatic attempt follows: nothing
    /// was sent, and a person decides whether to try again.
    Unsent,
    /// A receipt proves the effect.
    Succeeded,
    /// A person accepted the residual uncertainty; a waiver names it.
    Waived,
    /// The destination durably rejected the request.
    Rejected,
    /// Stopped on request before (or instead of) any further effect.
    Cancelled,
}

impl StepState {
    /// Every state.
    pub const ALL: [StepState; 12] = [
        StepState::Blocked,
        StepState::Ready,
        StepState::Held,
        StepState::Running,
        StepState::Invoking,
        StepState::OutcomeUnknown,
        StepState::ReviewRequired,
        StepState::Unsent,
        StepState::Succeeded,
        StepState::Waived,
        StepState::Rejected,
        StepState::Cancelled,
    ];

    /// The label people see. Unknown is never called failed.
    pub fn label(self) -> &'static str {
        match self {
            StepState::Blocked => "Waiting for an earlier step",
            StepState::Ready => "Ready",
            StepState::Held => "Held: its adapter may not send",
            StepState::Running => "Starting",
            StepState::Invoking => "Waiting for the destination",
            StepState::OutcomeUnknown => "Outcome unknown; checking",
            StepState::ReviewRequired => "Review required",
            StepState::Unsent => "Not sent; review required",
            StepState::Succeeded => "Succeeded",
            StepState::Waived => "Waived",
            StepState::Rejected => "Rejected by the destination",
            StepState::Cancelled => "Cancelled",
        }
    }

    /// What the time since the step began waiting measures, in its state's words: never
    /// "unknown" for a step whose truth is known (rejected, or never sent).
    pub fn waiting_since_label(self) -> &'static str {
        match self {
            StepState::Rejected => "rejected since",
            StepState::Unsent => "not sent; waiting since",
            StepState::OutcomeUnknown | StepState::ReviewRequired => "outcome unknown since",
            StepState::Blocked
            | StepState::Ready
            | StepState::Held
            | StepState::Running
            | StepState::Invoking
            | StepState::Succeeded
            | StepState::Waived
            | StepState::Cancelled => "waiting since",
        }
    }

    /// No worker will act on the step again without a person.
    pub fn is_final(self) -> bool {
        match self {
            StepState::Succeeded
            | StepState::Waived
            | StepState::Rejected
            | StepState::Cancelled => true,
            StepState::Blocked
            | StepState::Ready
            | StepState::Held
            | StepState::Running
            | StepState::Invoking
            | StepState::OutcomeUnknown
            | StepState::ReviewRequired
            | StepState::Unsent => false,
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

    #[test]
    fn no_step_label_calls_an_unknown_outcome_failed() {
        for state in StepState::ALL {
            assert!(!state.label().to_lowercase().contains("fail"), "{state:?}");
        }
    }
}
