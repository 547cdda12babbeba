//! Bulk runs (docs/DESIGN.md §7): what became of each item.

use serde::{Deserialize, Serialize};

/// What became of one item of a bulk run (`bulk_item.outcome`; none while it waits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "text", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum BulkOutcome {
    /// The action was performed.
    Done,
    /// It was not permitted on the step as it stood (or the run's author may no longer act).
    Refused,
    /// It could not be performed (a database error); the step is unchanged.
    Failed,
}

impl BulkOutcome {
    /// The name the item row records and the pages show.
    pub fn as_str(self) -> &'static str {
        match self {
            BulkOutcome::Done => "done",
            BulkOutcome::Refused => "refused",
            BulkOutcome::Failed => "failed",
        }
    }
}
