use serde::{Deserialize, Serialize};

/// One audit entry as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditItem {
    pub at: String,
    pub actor: String,
    pub actor_kind: String,
    pub action: String,
    pub step_id: Option<String>,
    pub workflow_id: Option<String>,
    pub reason: String,
    pub details: String,
}

/// One page of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPage {
    pub items: Vec<AuditItem>,
    /// The cursor of the next (older) page, when there is one.
    pub next: Option<String>,
}
