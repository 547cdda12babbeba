//! What a status lookup saw, and the one place where that becomes a fact of the decision table
//! (docs/DESIGN.md §6). The worker maps a fresh lookup through [`LookupAnswer::from_observation`];
//! the console reads a recorded one through [`LookupAnswer::from_observation_body`], which calls
//! the same function, so the two can never disagree about what the destination said.

use serde::{Deserialize, Serialize};

use super::recovery::LookupAnswer;

/// What a status lookup by client reference saw at the destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "seen", rename_all = "snake_case")]
pub enum LookupObservation {
    /// The destination holds the request; `all` lists every reference it holds for it.
    Found {
        external_reference: String,
        digest: String,
        all: Vec<String>,
    },
    /// The destination holds it under another digest.
    FoundWithConflictingDigest {
        external_reference: String,
        digest: String,
    },
    NotFound,
    Processing,
    Unavailable {
        detail: String,
    },
    /// The adapter has no lookup.
    NotSupported,
}

impl LookupAnswer {
    /// The decision-table fact for what a lookup saw: a found request matches only if the
    /// destination holds the content digest Z29C bound (`bound_digest`) before sending.
    pub fn from_observation(
        seen: &LookupObservation,
        bound_digest: &str,
        looked_after_sent_ms: i64,
    ) -> LookupAnswer {
        match seen {
            LookupObservation::Found {
                external_reference,
                digest,
                ..
            } => LookupAnswer::Found {
                external_reference: external_reference.clone(),
                digest_matches: digest == bound_digest,
                looked_after_sent_ms,
            },
            LookupObservation::FoundWithConflictingDigest {
                external_reference, ..
            } => LookupAnswer::Found {
                external_reference: external_reference.clone(),
                digest_matches: false,
                looked_after_sent_ms,
            },
            LookupObservation::NotFound => LookupAnswer::NotFound {
                looked_after_sent_ms,
            },
            LookupObservation::Processing => LookupAnswer::Processing,
            LookupObservation::Unavailable { .. } | LookupObservation::NotSupported => {
                LookupAnswer::Unavailable
            }
        }
    }

    /// The fact a recorded lookup observation stands for (the body the worker writes:
    /// `seen`, `bound_digest`, `looked_after_sent_ms`); `None` if the body is not a lookup.
    /// Observations recorded before `bound_digest` was kept compare as the destination
    /// reported them, found or found with a conflicting digest.
    pub fn from_observation_body(body: &serde_json::Value) -> Option<LookupAnswer> {
        let seen: LookupObservation = serde_json::from_value(body.get("seen")?.clone()).ok()?;
        let after = body["looked_after_sent_ms"].as_i64().unwrap_or(0);
        let bound = match (body["bound_digest"].as_str(), &seen) {
            (Some(bound), _) => bound,
            (None, LookupObservation::Found { digest, .. }) => digest.as_str(),
            (None, _) => "",
        };
        Some(LookupAnswer::from_observation(&seen, bound, after))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(digest: &str) -> LookupObservation {
        LookupObservation::Found {
            external_reference: "x-82".into(),
            digest: digest.into(),
            all: vec!["x-82".into()],
        }
    }

    fn recorded(seen: &LookupObservation, bound: &str) -> serde_json::Value {
        json!({ "seen": seen, "bound_digest": bound, "looked_after_sent_ms": 40 })
    }

    #[test]
    fn found_with_another_digest_than_the_bound_one_is_a_conflict_on_both_paths() {
        let seen = found("sha256:other");
        let fresh = LookupAnswer::from_observation(&seen, "sha256:bound", 40);
        let read_back = LookupAnswer::from_observation_body(&recorded(&seen, "sha256:bound"));
        let conflict = LookupAnswer::Found {
            external_reference: "x-82".into(),
            digest_matches: false,
            looked_after_sent_ms: 40,
        };
        assert_eq!(fresh, conflict);
        assert_eq!(read_back, Some(conflict));
    }

    #[test]
    fn found_under_the_bound_digest_matches_on_both_paths() {
        let seen = found("sha256:bound");
        let fresh = LookupAnswer::from_observation(&seen, "sha256:bound", 40);
        assert!(matches!(
            fresh,
            LookupAnswer::Found {
                digest_matches: true,
                ..
            }
        ));
        assert_eq!(
            LookupAnswer::from_observation_body(&recorded(&seen, "sha256:bound")),
            Some(fresh)
        );
    }

    #[test]
    fn every_observation_reads_back_as_the_answer_it_was_mapped_to() {
        let all = [
            found("d"),
            LookupObservation::FoundWithConflictingDigest {
                external_reference: "x-1".into(),
                digest: "e".into(),
            },
            LookupObservation::NotFound,
            LookupObservation::Processing,
            LookupObservation::Unavailable {
                detail: "503".into(),
            },
            LookupObservation::NotSupported,
        ];
        for seen in &all {
            assert_eq!(
                LookupAnswer::from_observation_body(&recorded(seen, "d")),
                Some(LookupAnswer::from_observation(seen, "d", 40)),
                "{seen:?}"
            );
        }
    }

    #[test]
    fn a_body_without_a_lookup_is_no_answer() {
        assert_eq!(
            LookupAnswer::from_observation_body(&json!({ "late": true })),
            None
        );
    }
}
