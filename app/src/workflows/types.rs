use engine::domain::StepState;
use serde::{Deserialize, Serialize};

use crate::forms::KeptForm;
use crate::notes::types::{NoteForm, NoteLine};

/// One step on the workflow page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepRow {
    pub id: String,
    pub logical: String,
    pub generation: i32,
    pub state: StepState,
    pub attempts: i32,
    pub request_key: String,
    pub external_reference: String,
    pub depends_on: Vec<String>,
}

/// What the workflow page shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowData {
    pub id: String,
    pub creation_key: String,
    pub definition: String,
    pub state: String,
    pub status: String,
    pub steps: Vec<StepRow>,
    /// "Paused by … since …: reason", while an operator's pause stands.
    pub paused: Option<String>,
    /// Whether the signed-in person may pause and resume it (an operator or an approver).
    pub may_pause: bool,
    pub csrf: String,
    pub notice: Option<String>,
    /// The pause or resume this session last posted here and the server refused, as typed.
    pub kept: Option<KeptForm>,
    /// The notes on the workflow, its steps and incidents, and the form for another.
    pub notes: Vec<NoteLine>,
    pub note: NoteForm,
    /// "Archived on … (settled …)", when it left the hot tables (docs/DESIGN.md §21).
    pub archived: Option<String>,
    /// A workflow back hot after a restore whose copy the archive keeps: when it was written and
    /// what it said (docs/DESIGN.md §21, "After a restore").
    pub copy: Option<String>,
    /// An archived workflow's receipts and audit entries, read back from its record, or those of
    /// the archive's copy of a workflow back hot.
    pub evidence: Vec<String>,
}
