//! What an adapter file gives verification: the probe that must succeed, the requests that
//! provoke failure paths, and every claim the file makes (docs/DESIGN.md §5).

use serde::{Deserialize, Serialize};

use super::AdapterSpec;
use crate::domain::{Claim, Operation};

/// What the contract suite sends: the probe that must succeed, and the requests that must not
/// (a declined card, an invalid parameter), each with the answer it must get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verify {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provoke: Vec<Provocation>,
}

/// A request verification sends to provoke a failure path, and what its answer must be read as.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provocation {
    pub name: String,
    pub request: serde_json::Value,
    pub expect: Expected,
}

/// The conclusion a provocation's answer must reach: `rejected: CODE` or
/// `failed_before_effect: CODE`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ExpectedFile", into = "ExpectedFile")]
pub enum Expected {
    Rejected(String),
    FailedBeforeEffect(String),
}

/// `expect` as files write it: a map with exactly one of its two conclusions.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rejected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failed_before_effect: Option<String>,
}

impl TryFrom<ExpectedFile> for Expected {
    type Error = &'static str;

    fn try_from(file: ExpectedFile) -> Result<Self, Self::Error> {
        match (file.rejected, file.failed_before_effect) {
            (Some(code), None) => Ok(Expected::Rejected(code)),
            (None, Some(code)) => Ok(Expected::FailedBeforeEffect(code)),
            _ => Err("expect is exactly one of `rejected: CODE` and `failed_before_effect: CODE`"),
        }
    }
}

impl From<Expected> for ExpectedFile {
    fn from(expected: Expected) -> Self {
        match expected {
            Expected::Rejected(code) => ExpectedFile {
                rejected: Some(code),
                failed_before_effect: None,
            },
            Expected::FailedBeforeEffect(code) => ExpectedFile {
                rejected: None,
                failed_before_effect: Some(code),
            },
        }
    }
}

impl AdapterSpec {
    /// The request the contract suite sends, when the file names one.
    pub fn probe(&self) -> Option<&serde_json::Value> {
        self.verify.as_ref().and_then(|v| v.probe.as_ref())
    }

    /// The requests verification sends to provoke a failure path.
    pub fn provocations(&self) -> &[Provocation] {
        self.verify.as_ref().map_or(&[], |v| v.provoke.as_slice())
    }

    /// Every claim the file makes (docs/DESIGN.md §5): delivery, each capability it declares,
    /// each rule that reads an answer as `rejected` or `failed_before_effect`, each provocation.
    pub fn claims(&self) -> Vec<Claim> {
        let mut claims = vec![Claim::Delivery];
        if self.idempotency.is_some() {
            claims.push(Claim::IdempotencyKey);
        }
        if self.lookup.is_some() {
            claims.push(Claim::Lookup);
        }
        if self.withdraw.is_some() {
            claims.push(Claim::Withdrawal);
        }
        let operations = [
            (Operation::Deliver, Some(&self.deliver.outcomes)),
            (
                Operation::Withdraw,
                self.withdraw.as_ref().map(|w| &w.outcomes),
            ),
        ];
        for (operation, rules) in operations {
            for (index, rule) in rules.into_iter().flatten().enumerate() {
                if rule.says_nothing_happened() {
                    claims.push(Claim::Rule { operation, index });
                }
            }
        }
        claims.extend((0..self.provocations().len()).map(|index| Claim::Provocation { index }));
        claims
    }
}
