//! Checkpoint 2, authority (docs/DESIGN.md §4): whether an attempt may go, decided just before
//! the boundary from the suspensions in force, and recorded with the attempt it was taken for.

use serde_json::Value;

/// An authority decision: granted unless a suspension of the adapter or the subject applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Authority {
    /// Why it was denied; `None` when granted.
    pub denied: Option<String>,
    /// What the attempt records: `{granted, reason, scope}`.
    pub record: Value,
}

impl Authority {
    /// Decides from `suspensions` (scope, value, reason) for `adapter` and `subject`; an adapter
    /// suspension is named before a subject's.
    pub fn decide(suspensions: &[(String, String, String)], adapter: &str, subject: &str) -> Self {
        let denied = suspensions
            .iter()
            .find(|(scope, value, _)| scope == "adapter" && value == adapter)
            .or_else(|| {
                suspensions
                    .iter()
                    .find(|(scope, value, _)| scope == "subject" && value == subject)
            })
            .map(|(scope, value, reason)| format!("{scope} {value} is suspended: {reason}"));
        let record = serde_json::json!({
            "granted": denied.is_none(),
            "reason": denied.as_deref().unwrap_or("no suspension applies"),
            "scope": { "adapter": adapter, "subject": subject, "action": "deliver" },
        });
        Self { denied, record }
    }
}
