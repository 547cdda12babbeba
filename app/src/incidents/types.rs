use serde::{Deserialize, Serialize};

use crate::forms::KeptForm;
use crate::notes::types::{NoteForm, NoteLine};

/// One external reference an incident concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferenceView {
    pub external_reference: String,
    pub request_key: String,
    pub evidence: String,
    pub observed_at: String,
    pub on_receipt: bool,
}

/// What the incident page shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncidentView {
    pub id: String,
    pub kind: String,
    pub opened_at: String,
    pub step_id: String,
    pub workflow_id: String,
    pub creation_key: String,
    pub logical: String,
    pub adapter: String,
    pub request_key: String,
    pub references: Vec<ReferenceView>,
    /// "canonical x-1, withdrawal requested, by carol at …: reason".
    pub resolution: Option<String>,
    /// Withdrawal steps: id, reference, state label.
    pub withdrawals: Vec<(String, String, String)>,
    pub withdrawable: bool,
    /// Whether the signed-in person may resolve it (an approver).
    pub may_resolve: bool,
    pub csrf: String,
    pub notice: Option<String>,
    /// The resolution this session last posted here and the server refused, as typed.
    pub kept: Option<KeptForm>,
    /// The notes on this incident, and the form for another.
    pub notes: Vec<NoteLine>,
    pub note: NoteForm,
}
