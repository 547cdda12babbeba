//! Checkpoint 2, authority (docs/DESIGN.md §4): whether an attempt may go, decided just before
//! the boundary from the suspensions in force, and recorded with the attempt it was taken for.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What an authority suspension covers (`authority_suspension.scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "text", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum SuspensionScope {
    /// Every call to one adapter.
    Adapter,
    /// Every call about one subject (a workflow's subject, e.g. a customer).
    Subject,
}

impl SuspensionScope {
    /// The name the row and the attempt's record use.
    pub fn as_str(self) -> &'static str {
        match self {
            SuspensionScope::Adapter => "adapter",
            SuspensionScope::Subject => "subject",
        }
    }
}

/// One suspension in force.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspension {
    pub scope: SuspensionScope,
    /// The adapter's name, or the subject.
    pub value: String,
    pub reason: String,
}

/// An authority decision: granted unless a suspension of the adapter or the subject applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Authority {
    /// Why it was denied; `None` when granted.
    pub denied: Option<String>,
    /// What the attempt records: `{granted, reason, scope}`.
    pub record: Value,
}

impl Authority {
    /// Decides from `suspensions` for `adapter` and `subject`; an adapter suspension is named
    /// before a subject's.
    pub fn decide(suspensions: &[Suspension], adapter: &str, subject: &str) -> Self {
        let covering = |scope: SuspensionScope, value: &str| {
            suspensions
                .iter()
                .find(|s| s.scope == scope && s.value == value)
        };
        let denied = covering(SuspensionScope::Adapter, adapter)
            .or_else(|| covering(SuspensionScope::Subject, subject))
            .map(|s| {
                format!(
                    "{} {} is suspended: {}",
                    s.scope.as_str(),
                    s.value,
                    s.reason
                )
            });
        let record = serde_json::json!({
            "granted": denied.is_none(),
            "reason": denied.as_deref().unwrap_or("no suspension applies"),
            "scope": { "adapter": adapter, "subject": subject, "action": "deliver" },
        });
        Self { denied, record }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suspended(scope: SuspensionScope, value: &str) -> Suspension {
        Suspension {
            scope,
            value: value.to_owned(),
            reason: format!("{value} under review"),
        }
    }

    #[test]
    fn an_adapter_suspension_is_named_before_a_subjects_and_others_grant() {
        let both = [
            suspended(SuspensionScope::Subject, "cus_1"),
            suspended(SuspensionScope::Adapter, "payments"),
        ];
        let denied = Authority::decide(&both, "payments", "cus_1");
        assert_eq!(
            denied.denied.as_deref(),
            Some("adapter payments is suspended: payments under review")
        );
        assert_eq!(denied.record["granted"], false);
        let subject = Authority::decide(&both, "mail", "cus_1");
        assert_eq!(
            subject.denied.as_deref(),
            Some("subject cus_1 is suspended: cus_1 under review")
        );
        let granted = Authority::decide(&both, "mail", "cus_2");
        assert_eq!(granted.denied, None);
        assert_eq!(granted.record["reason"], "no suspension applies");
    }
}
