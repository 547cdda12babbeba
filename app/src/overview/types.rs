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

/// The archive's standing, as the overview's card shows it (docs/DESIGN.md §21).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArchiveStanding {
    pub workflows: i64,
    pub audit_entries: i64,
    pub events: i64,
    pub bytes: i64,
    /// "2026-12-06 10:00 UTC (0.4 s)", or none yet.
    pub last_turn: Option<String>,
    /// How long ago the oldest settled workflow still in the hot tables settled, in days.
    pub oldest_settled_days: Option<f64>,
}
