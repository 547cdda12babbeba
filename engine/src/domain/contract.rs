//! What an adapter declares it can prove about its destination: executable metadata that the
//! recovery rules read, verified by contract tests before it is trusted.

use serde::{Deserialize, Serialize};

/// What to do when an attempt's outcome is unknown, whatever else the contract offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownOutcomePolicy {
    /// Recover automatically where the capabilities allow (replay or query).
    Query,
    /// Never recover automatically: a person reviews every unknown outcome.
    Review,
}

/// Whether an effect can be counteracted, and what a counteraction cannot undo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compensation {
    /// No counteraction exists.
    None,
    /// A counteraction exists; the text names what it cannot restore.
    SupportedWithLimits(String),
}

/// The capabilities an adapter declares for its destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideEffectContract {
    /// Same key and digest returns the original result; same key, other digest is rejected.
    pub accepts_idempotency_key: bool,
    /// A status lookup by client reference exists.
    pub query_by_client_reference: bool,
    /// How long a "not found" may still turn into "found" (the status index's lag).
    pub visibility_window_ms: u64,
    /// May a new attempt with the same reference follow a not-found after the window?
    pub create_after_authoritative_absence: bool,
    /// Whether the effect can be withdrawn, and with which limits.
    pub compensation: Compensation,
    /// Automatic recovery or review for unknown outcomes.
    pub unknown_outcome_policy: UnknownOutcomePolicy,
    /// Rejection codes after which another attempt may succeed.
    pub retryable_rejections: Vec<String>,
    /// How long a call may take before its outcome is unknown.
    pub deadline_ms: u64,
    /// How often a step is sent again while each attempt fails before any effect; the
    /// worker's own schedule when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySchedule>,
    /// How long the destination keeps idempotency keys, when it forgets them (absent: as long
    /// as it keeps the effect). Past it less `REPLAY_MARGIN`, no same-key replay is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_retention_ms: Option<u64>,
}

/// How many attempts a step makes while each fails before any effect, and how long it waits
/// between them: `backoff_ms`, doubling per attempt, at most `max_backoff_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetrySchedule {
    pub attempts: u32,
    pub backoff_ms: u64,
    pub max_backoff_ms: u64,
}

impl RetrySchedule {
    /// How long to wait after attempt `attempt` (1-based) failed before any effect.
    pub fn backoff_after(&self, attempt: u32) -> u64 {
        let doublings = attempt.saturating_sub(1).min(20);
        self.backoff_ms
            .saturating_mul(1 << doublings)
            .min(self.max_backoff_ms)
    }
}

/// How long before a provider's idempotency retention ends no same-key replay is made, in
/// milliseconds (ten minutes). A replay decided just inside the retention can still reach the
/// provider after it — the decision, a queue, backoff and the call's own deadline all take
/// time, and the provider's clock is not Z29C's — so the last stretch is left alone.
pub const REPLAY_MARGIN_MS: u64 = 10 * 60 * 1_000;

/// The three families of contract the recovery table distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContractKind {
    /// Accepts an idempotency key (it may also be queryable).
    Idempotent,
    /// No key deduplication, but a status lookup by client reference.
    Queryable,
    /// Neither: nothing can prove an unknown outcome.
    Opaque,
}

impl ContractKind {
    /// Every kind, strongest first.
    pub const ALL: [ContractKind; 3] = [
        ContractKind::Idempotent,
        ContractKind::Queryable,
        ContractKind::Opaque,
    ];

    /// The kind's name, as destinations and the CLI spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ContractKind::Idempotent => "idempotent",
            ContractKind::Queryable => "queryable",
            ContractKind::Opaque => "opaque",
        }
    }

    /// The kind named `name`, if it is one.
    pub fn parse(name: &str) -> Option<ContractKind> {
        ContractKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl SideEffectContract {
    /// Which row of the recovery table this contract falls in.
    pub fn kind(&self) -> ContractKind {
        if self.accepts_idempotency_key {
            ContractKind::Idempotent
        } else if self.query_by_client_reference {
            ContractKind::Queryable
        } else {
            ContractKind::Opaque
        }
    }

    /// Whether the destination may already have forgotten a key first sent
    /// `first_sent_ms_ago`: its idempotency retention less [`REPLAY_MARGIN_MS`] has passed,
    /// so a same-key retry could make the effect again. Unknown age or no retention: no.
    pub fn idempotency_key_expired(&self, first_sent_ms_ago: Option<u64>) -> bool {
        match (self.idempotency_retention_ms, first_sent_ms_ago) {
            (Some(retention), Some(age)) => age > retention.saturating_sub(REPLAY_MARGIN_MS),
            _ => false,
        }
    }

    /// Why a same-key retry is no longer safe, when [`Self::idempotency_key_expired`].
    pub fn idempotency_expiry_sentence(&self, first_sent_ms_ago: Option<u64>) -> Option<String> {
        if !self.idempotency_key_expired(first_sent_ms_ago) {
            return None;
        }
        Some(format!(
            "The provider keeps idempotency keys for {} and this key was first sent {} ago: the provider may have forgotten it, so a same-key retry could make the effect a second time.",
            span(self.idempotency_retention_ms?),
            span(first_sent_ms_ago?)
        ))
    }

    /// Whether rejection `code` allows another attempt.
    pub fn rejection_is_retryable(&self, code: &str) -> bool {
        self.retryable_rejections.iter().any(|c| c == code)
    }

    /// The capabilities in a few words, as the console shows them at a glance.
    pub fn capabilities_summary(&self) -> String {
        let mut parts = Vec::new();
        if self.accepts_idempotency_key {
            parts.push("idempotency key".to_owned());
        }
        if self.query_by_client_reference {
            parts.push(format!(
                "status lookup ({} ms visibility window)",
                self.visibility_window_ms
            ));
        }
        if parts.is_empty() {
            parts.push("opaque: no key, no lookup".to_owned());
        }
        if let Compensation::SupportedWithLimits(_) = self.compensation {
            parts.push("withdrawal".to_owned());
        }
        if self.unknown_outcome_policy == UnknownOutcomePolicy::Review {
            parts.push("unknown outcomes always reviewed".to_owned());
        }
        parts.join(", ")
    }
}

/// A span of time as people read it: `24 h`, `23 h 52 min`, `45 min`.
pub fn span(ms: u64) -> String {
    let minutes = ms / 60_000;
    match (minutes / 60, minutes % 60) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    fn base() -> SideEffectContract {
        SideEffectContract {
            accepts_idempotency_key: false,
            query_by_client_reference: false,
            visibility_window_ms: 0,
            create_after_authoritative_absence: false,
            compensation: Compensation::SupportedWithLimits(
                "a withdrawn document may already have been read".into(),
            ),
            unknown_outcome_policy: UnknownOutcomePolicy::Query,
            retryable_rejections: vec!["rate_limited".into()],
            deadline_ms: 2_000,
            retry: None,
            idempotency_retention_ms: None,
        }
    }

    pub fn idempotent() -> SideEffectContract {
        SideEffectContract {
            accepts_idempotency_key: true,
            ..base()
        }
    }

    pub fn queryable() -> SideEffectContract {
        SideEffectContract {
            query_by_client_reference: true,
            visibility_window_ms: 1_500,
            create_after_authoritative_absence: true,
            ..base()
        }
    }

    pub fn opaque() -> SideEffectContract {
        base()
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn the_contract_kind_follows_the_strongest_capability() {
        let mut both = idempotent();
        both.query_by_client_reference = true;
        assert_eq!(both.kind(), ContractKind::Idempotent);
        assert_eq!(queryable().kind(), ContractKind::Queryable);
        assert_eq!(opaque().kind(), ContractKind::Opaque);
    }

    #[test]
    fn every_contract_kind_parses_from_its_own_name() {
        for kind in ContractKind::ALL {
            assert_eq!(ContractKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(ContractKind::parse("exactly_once"), None);
    }

    #[test]
    fn only_declared_rejection_codes_are_retryable() {
        assert!(opaque().rejection_is_retryable("rate_limited"));
        assert!(!opaque().rejection_is_retryable("recipient_unknown"));
    }
}
