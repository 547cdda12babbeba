use serde::{Deserialize, Serialize};

use crate::forms::KeptForm;

/// What an adapter's limit form says its page showed when no override was in force (an empty
/// field would reach the server as no field at all, and skip the check).
pub const NO_OVERRIDE: &str = "none";

/// One adapter on the adapters page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdapterRow {
    pub name: String,
    /// "idempotent", "queryable", "opaque"…
    pub kind: String,
    /// What the engine acts on: the declared contract cut down to the verified claims.
    pub capabilities: String,
    /// Its current version passed verification.
    pub verified: bool,
    /// Each claim of the current version, with what verification found ("verified",
    /// "unverified", "refuted").
    pub claims: Vec<(String, String)>,
    /// "Held by … since …: reason", while a hold stands (an approver's, or its breaker's).
    pub held: Option<String>,
    /// For a breaker's hold, the attempts that tripped it: "at · what was seen · step id".
    pub tripped_by: Vec<(String, String, String)>,
    /// The breaker its file declares, in words ("holds itself after 5 troubled attempts within
    /// 60s").
    pub breaker: Option<String>,
    /// Its outbound limits in force, in words, and whose they are (its file's, or an
    /// approver's override with who, when and why); `None` when unlimited.
    pub limits: Option<String>,
    /// When the approver's override in force was set (exact, for the form to say which one its
    /// page showed), or [`NO_OVERRIDE`]; the form offers to clear one.
    pub limit_shown: String,
    /// Steps waiting held for it now.
    pub held_steps: i64,
}

/// What the adapters page shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdaptersView {
    pub adapters: Vec<AdapterRow>,
    /// Whether the signed-in person may hold, resume and limit (an approver).
    pub may_hold: bool,
    pub csrf: String,
    pub notice: Option<String>,
    /// The hold, resume or limit this session last posted here and the server refused, as
    /// typed.
    pub kept: Option<KeptForm>,
}
