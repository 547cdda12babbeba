//! The kinds of event the outbox carries (docs/DESIGN.md §10). Every transition that other
//! parts of Z29C react to is announced under one of these, in the transaction that makes it.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::WorkflowState;

/// What an outbox event announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    #[serde(rename = "workflow.started")]
    WorkflowStarted,
    #[serde(rename = "workflow.state_changed")]
    WorkflowStateChanged,
    #[serde(rename = "step.attempt_ended")]
    StepAttemptEnded,
    #[serde(rename = "step.succeeded")]
    StepSucceeded,
    #[serde(rename = "step.verified")]
    StepVerified,
    #[serde(rename = "step.waived")]
    StepWaived,
    #[serde(rename = "step.cancelled")]
    StepCancelled,
    #[serde(rename = "step.replaced")]
    StepReplaced,
    #[serde(rename = "step.held")]
    StepHeld,
    #[serde(rename = "step.released")]
    StepReleased,
    #[serde(rename = "incident.opened")]
    IncidentOpened,
    #[serde(rename = "incident.resolved")]
    IncidentResolved,
    #[serde(rename = "alert.opened")]
    AlertOpened,
}

impl EventKind {
    /// Every kind, in the order a workflow usually meets them.
    pub const ALL: [EventKind; 13] = [
        EventKind::WorkflowStarted,
        EventKind::WorkflowStateChanged,
        EventKind::StepAttemptEnded,
        EventKind::StepSucceeded,
        EventKind::StepVerified,
        EventKind::StepWaived,
        EventKind::StepCancelled,
        EventKind::StepReplaced,
        EventKind::StepHeld,
        EventKind::StepReleased,
        EventKind::IncidentOpened,
        EventKind::IncidentResolved,
        EventKind::AlertOpened,
    ];

    /// The name the outbox stores.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::WorkflowStarted => "workflow.started",
            EventKind::WorkflowStateChanged => "workflow.state_changed",
            EventKind::StepAttemptEnded => "step.attempt_ended",
            EventKind::StepSucceeded => "step.succeeded",
            EventKind::StepVerified => "step.verified",
            EventKind::StepWaived => "step.waived",
            EventKind::StepCancelled => "step.cancelled",
            EventKind::StepReplaced => "step.replaced",
            EventKind::StepHeld => "step.held",
            EventKind::StepReleased => "step.released",
            EventKind::IncidentOpened => "incident.opened",
            EventKind::IncidentResolved => "incident.resolved",
            EventKind::AlertOpened => "alert.opened",
        }
    }

    /// The kind stored as `name`; `None` for a name this version does not know (an event
    /// written by a newer version), which consumers leave alone.
    pub fn parse(name: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// The payload of `step.succeeded` for a pure step: the step, by id and name.
pub fn pure_step_succeeded(step: Uuid, logical: &str) -> Value {
    json!({ "step": step, "logical": logical })
}

/// The payload of `workflow.state_changed`.
pub fn state_changed(from: WorkflowState, to: WorkflowState) -> Value {
    json!({ "from": from, "to": to })
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_kind_parses_from_the_name_it_is_stored_under() {
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
        }
        assert_eq!(EventKind::parse("step.exploded"), None);
    }
}
