//! The recovery decision table of docs/DESIGN.md §6: what the engine does, on its own, with a step
//! whose call may have happened. Pure, so the console can show the same reasoning.

use serde::{Deserialize, Serialize};

use super::contract::{ContractKind, SideEffectContract, UnknownOutcomePolicy};

/// What a status lookup by client reference answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum LookupAnswer {
    /// Found, with the digest the destination holds, `looked_after_sent_ms` after the request
    /// (last) sent could have reached it, its deadline after it left — negative when the
    /// lookup left before then: inside the visibility window a later delivery under the same
    /// key may not show yet.
    Found {
        external_reference: String,
        digest_matches: bool,
        looked_after_sent_ms: i64,
    },
    /// Not found, `looked_after_sent_ms` after the request (last) sent could have reached it.
    NotFound { looked_after_sent_ms: i64 },
    /// Known to the destination but not finished.
    Processing,
    /// The lookup itself could not be answered.
    Unavailable,
}

impl LookupAnswer {
    /// A "not found" is proof of absence only from a lookup the contract trusts (its claim
    /// verified for the version acting on it), once the visibility window has passed. A "not
    /// found" recorded before the lookup stopped counting proves nothing any more.
    pub fn is_authoritative_absence(&self, contract: &SideEffectContract) -> bool {
        contract.query_by_client_reference
            && matches!(self, LookupAnswer::NotFound { .. })
            && self.index_settles_in_ms(contract) == 0
    }

    /// How much longer the destination's index may take to show every delivery made under the
    /// key (zero once the visibility window has passed). A "found" settles a step only then:
    /// earlier, a second delivery — the one this request made, beside an older one — may be
    /// missing from the answer, and the duplicate would go unseen.
    pub fn index_settles_in_ms(&self, contract: &SideEffectContract) -> u64 {
        match self {
            LookupAnswer::Found {
                looked_after_sent_ms,
                ..
            }
            | LookupAnswer::NotFound {
                looked_after_sent_ms,
            } => {
                let window = i64::try_from(contract.visibility_window_ms).unwrap_or(i64::MAX);
                u64::try_from(window.saturating_sub(*looked_after_sent_ms)).unwrap_or(0)
            }
            LookupAnswer::Processing | LookupAnswer::Unavailable => 0,
        }
    }
}

/// Why a step waits for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewReason {
    /// The provider may have forgotten the key: its idempotency retention, less the replay
    /// margin, has passed since the key was first sent.
    IdempotencyRetentionPassed {
        retention_ms: u64,
        first_sent_ms_ago: u64,
    },
    /// The contract says unknown outcomes are always reviewed.
    PolicyRequiresReview,
    /// The adapter can neither deduplicate nor look up: nothing can prove the outcome.
    NothingCanProveTheOutcome,
    /// Absence is authoritative but the contract does not allow creating again.
    AbsentButRecreationNotAllowed,
    /// The workflow's deadline for automatic recovery has passed.
    RecoveryDeadlinePassed,
}

impl ReviewReason {
    /// The sentence the console shows.
    pub fn sentence(self) -> String {
        let fixed = match self {
            ReviewReason::IdempotencyRetentionPassed {
                retention_ms,
                first_sent_ms_ago,
            } => {
                return format!(
                    "The provider keeps idempotency keys for {} and this key was first sent {} ago: the provider may have forgotten it, so a same-key retry could make the effect a second time.",
                    super::contract::span(retention_ms),
                    super::contract::span(first_sent_ms_ago)
                );
            }
            ReviewReason::PolicyRequiresReview => {
                "The adapter's contract asks for a person to review every unknown outcome."
            }
            ReviewReason::NothingCanProveTheOutcome => {
                "The destination offers no idempotency key and no status lookup, so nothing can prove whether the delivery happened."
            }
            ReviewReason::AbsentButRecreationNotAllowed => {
                "The destination has no record of the request, but its contract does not allow sending it again automatically."
            }
            ReviewReason::RecoveryDeadlinePassed => {
                "Automatic recovery ran out of time before the outcome could be established."
            }
        };
        fixed.to_owned()
    }
}

/// The facts automatic recovery decides from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownOutcomeFacts {
    /// The latest lookup answer since the request was last sent, if any.
    pub last_lookup: Option<LookupAnswer>,
    /// The workflow's window for automatic recovery has closed.
    pub recovery_deadline_passed: bool,
    /// How long ago the request key was first sent (`external_request.first_sent_at`), when
    /// known: past the contract's idempotency retention less the margin, no same-key replay.
    pub key_first_sent_ms_ago: Option<u64>,
}

/// What automatic recovery does next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum RecoveryDecision {
    /// Send again with the same key and digest; the destination returns the original result.
    ResendSameKey,
    /// Ask the destination by client reference.
    Query,
    /// Found with the same digest: attach a `status_query` receipt.
    AttachStatusQueryReceipt { external_reference: String },
    /// Found with another digest: an integrity incident, never a success.
    OpenDigestConflictIncident { external_reference: String },
    /// Not yet conclusive (inside the window, or still processing): query again later.
    QueryAgainAfter { wait_ms: u64 },
    /// The lookup is unavailable: back off, then query again.
    BackOffThenQuery,
    /// Absence is authoritative and the contract allows it: send again with the same reference.
    RetrySameReference,
    /// Stop: a person must decide.
    Review { reason: ReviewReason },
}

/// How long to wait before asking again about a delivery the destination is still processing.
pub const PROCESSING_RECHECK_MS: u64 = 500;

/// The recovery decision table, exactly: idempotent → resend the same key; queryable → query
/// first and honour the visibility window; opaque or `review` policy → review, never a call.
pub fn decide_after_unknown(
    contract: &SideEffectContract,
    facts: &UnknownOutcomeFacts,
) -> RecoveryDecision {
    if contract.unknown_outcome_policy == UnknownOutcomePolicy::Review {
        return RecoveryDecision::Review {
            reason: ReviewReason::PolicyRequiresReview,
        };
    }
    if facts.recovery_deadline_passed {
        return RecoveryDecision::Review {
            reason: ReviewReason::RecoveryDeadlinePassed,
        };
    }
    match contract.kind() {
        ContractKind::Idempotent
            if contract.idempotency_key_expired(facts.key_first_sent_ms_ago) =>
        {
            RecoveryDecision::Review {
                reason: ReviewReason::IdempotencyRetentionPassed {
                    retention_ms: contract.idempotency_retention_ms.unwrap_or(0),
                    first_sent_ms_ago: facts.key_first_sent_ms_ago.unwrap_or(0),
                },
            }
        }
        ContractKind::Idempotent => RecoveryDecision::ResendSameKey,
        ContractKind::Opaque => RecoveryDecision::Review {
            reason: ReviewReason::NothingCanProveTheOutcome,
        },
        ContractKind::Queryable => match &facts.last_lookup {
            None => RecoveryDecision::Query,
            Some(
                found @ LookupAnswer::Found {
                    external_reference,
                    digest_matches: true,
                    ..
                },
            ) => match found.index_settles_in_ms(contract) {
                0 => RecoveryDecision::AttachStatusQueryReceipt {
                    external_reference: external_reference.clone(),
                },
                wait_ms => RecoveryDecision::QueryAgainAfter { wait_ms },
            },
            Some(LookupAnswer::Found {
                external_reference,
                digest_matches: false,
                ..
            }) => RecoveryDecision::OpenDigestConflictIncident {
                external_reference: external_reference.clone(),
            },
            Some(LookupAnswer::Processing) => RecoveryDecision::QueryAgainAfter {
                wait_ms: PROCESSING_RECHECK_MS,
            },
            Some(LookupAnswer::Unavailable) => RecoveryDecision::BackOffThenQuery,
            Some(absent @ LookupAnswer::NotFound { .. }) => {
                match absent.index_settles_in_ms(contract) {
                    0 if contract.create_after_authoritative_absence => {
                        RecoveryDecision::RetrySameReference
                    }
                    0 => RecoveryDecision::Review {
                        reason: ReviewReason::AbsentButRecreationNotAllowed,
                    },
                    wait_ms => RecoveryDecision::QueryAgainAfter { wait_ms },
                }
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract::REPLAY_MARGIN_MS;
    use super::super::contract::fixtures::{idempotent, opaque, queryable};
    use super::*;

    #[test]
    fn a_lookup_before_the_deadline_waits_out_the_rest_of_it_and_then_the_window() {
        let c = queryable();
        let window = c.visibility_window_ms;
        let early = LookupAnswer::NotFound {
            looked_after_sent_ms: -1_700,
        };
        assert_eq!(early.index_settles_in_ms(&c), window + 1_700);
        let inside = LookupAnswer::NotFound {
            looked_after_sent_ms: 200,
        };
        assert_eq!(inside.index_settles_in_ms(&c), window - 200);
        let past = LookupAnswer::NotFound {
            looked_after_sent_ms: i64::try_from(window).unwrap() + 1,
        };
        assert_eq!(past.index_settles_in_ms(&c), 0);
        assert!(past.is_authoritative_absence(&c) && !early.is_authoritative_absence(&c));
    }

    fn facts(last_lookup: Option<LookupAnswer>) -> UnknownOutcomeFacts {
        UnknownOutcomeFacts {
            last_lookup,
            recovery_deadline_passed: false,
            key_first_sent_ms_ago: None,
        }
    }

    fn every_lookup() -> Vec<Option<LookupAnswer>> {
        vec![
            None,
            Some(LookupAnswer::Found {
                external_reference: "x-1".into(),
                digest_matches: true,
                looked_after_sent_ms: 60_000,
            }),
            Some(LookupAnswer::Found {
                external_reference: "x-1".into(),
                digest_matches: false,
                looked_after_sent_ms: 0,
            }),
            Some(LookupAnswer::NotFound {
                looked_after_sent_ms: 0,
            }),
            Some(LookupAnswer::NotFound {
                looked_after_sent_ms: 10_000,
            }),
            Some(LookupAnswer::Processing),
            Some(LookupAnswer::Unavailable),
        ]
    }

    #[test]
    fn an_idempotent_adapter_resends_the_same_key_whatever_was_looked_up() {
        for lookup in every_lookup() {
            assert_eq!(
                decide_after_unknown(&idempotent(), &facts(lookup)),
                RecoveryDecision::ResendSameKey
            );
        }
    }

    #[test]
    fn an_opaque_adapter_never_calls_again_and_goes_to_review() {
        for lookup in every_lookup() {
            assert_eq!(
                decide_after_unknown(&opaque(), &facts(lookup)),
                RecoveryDecision::Review {
                    reason: ReviewReason::NothingCanProveTheOutcome
                }
            );
        }
    }

    #[test]
    fn a_review_policy_overrides_every_capability() {
        for mut contract in [idempotent(), queryable(), opaque()] {
            contract.unknown_outcome_policy = UnknownOutcomePolicy::Review;
            for lookup in every_lookup() {
                assert_eq!(
                    decide_after_unknown(&contract, &facts(lookup)),
                    RecoveryDecision::Review {
                        reason: ReviewReason::PolicyRequiresReview
                    }
                );
            }
        }
    }

    #[test]
    fn a_passed_recovery_deadline_stops_automation_for_every_kind() {
        for contract in [idempotent(), queryable()] {
            let f = UnknownOutcomeFacts {
                last_lookup: None,
                recovery_deadline_passed: true,
                key_first_sent_ms_ago: None,
            };
            assert_eq!(
                decide_after_unknown(&contract, &f),
                RecoveryDecision::Review {
                    reason: ReviewReason::RecoveryDeadlinePassed
                }
            );
        }
    }

    #[test]
    fn a_queryable_adapter_queries_before_anything_else() {
        assert_eq!(
            decide_after_unknown(&queryable(), &facts(None)),
            RecoveryDecision::Query
        );
    }

    #[test]
    fn found_with_the_same_digest_after_the_window_attaches_a_status_query_receipt() {
        let found = LookupAnswer::Found {
            external_reference: "x-82".into(),
            digest_matches: true,
            looked_after_sent_ms: i64::try_from(queryable().visibility_window_ms).unwrap(),
        };
        assert_eq!(
            decide_after_unknown(&queryable(), &facts(Some(found))),
            RecoveryDecision::AttachStatusQueryReceipt {
                external_reference: "x-82".into()
            }
        );
    }

    #[test]
    fn found_inside_the_visibility_window_waits_until_every_delivery_can_show() {
        let early = LookupAnswer::Found {
            external_reference: "x-82".into(),
            digest_matches: true,
            looked_after_sent_ms: 400,
        };
        assert_eq!(
            decide_after_unknown(&queryable(), &facts(Some(early))),
            RecoveryDecision::QueryAgainAfter {
                wait_ms: queryable().visibility_window_ms - 400
            }
        );
    }

    #[test]
    fn found_with_another_digest_opens_an_incident() {
        let found = LookupAnswer::Found {
            external_reference: "x-82".into(),
            digest_matches: false,
            looked_after_sent_ms: 0,
        };
        assert_eq!(
            decide_after_unknown(&queryable(), &facts(Some(found))),
            RecoveryDecision::OpenDigestConflictIncident {
                external_reference: "x-82".into()
            }
        );
    }

    #[test]
    fn not_found_inside_the_visibility_window_waits_for_the_rest_of_it() {
        let early = LookupAnswer::NotFound {
            looked_after_sent_ms: 400,
        };
        assert!(!early.is_authoritative_absence(&queryable()));
        assert_eq!(
            decide_after_unknown(&queryable(), &facts(Some(early))),
            RecoveryDecision::QueryAgainAfter { wait_ms: 1_100 }
        );
    }

    #[test]
    fn not_found_after_the_window_retries_the_same_reference_when_allowed() {
        let late = LookupAnswer::NotFound {
            looked_after_sent_ms: 1_500,
        };
        assert!(late.is_authoritative_absence(&queryable()));
        assert_eq!(
            decide_after_unknown(&queryable(), &facts(Some(late))),
            RecoveryDecision::RetrySameReference
        );
    }

    #[test]
    fn not_found_after_the_window_goes_to_review_when_recreation_is_not_allowed() {
        let mut contract = queryable();
        contract.create_after_authoritative_absence = false;
        let late = LookupAnswer::NotFound {
            looked_after_sent_ms: 5_000,
        };
        assert_eq!(
            decide_after_unknown(&contract, &facts(Some(late))),
            RecoveryDecision::Review {
                reason: ReviewReason::AbsentButRecreationNotAllowed
            }
        );
    }

    #[test]
    fn still_processing_or_unavailable_asks_again_later() {
        assert_eq!(
            decide_after_unknown(&queryable(), &facts(Some(LookupAnswer::Processing))),
            RecoveryDecision::QueryAgainAfter {
                wait_ms: PROCESSING_RECHECK_MS
            }
        );
        assert_eq!(
            decide_after_unknown(&queryable(), &facts(Some(LookupAnswer::Unavailable))),
            RecoveryDecision::BackOffThenQuery
        );
    }

    const HOUR_MS: u64 = 3_600_000;

    fn retaining_a_day() -> SideEffectContract {
        SideEffectContract {
            idempotency_retention_ms: Some(24 * HOUR_MS),
            ..idempotent()
        }
    }

    fn sent_ago(ms: u64) -> UnknownOutcomeFacts {
        UnknownOutcomeFacts {
            key_first_sent_ms_ago: Some(ms),
            ..facts(None)
        }
    }

    #[test]
    fn inside_the_idempotency_retention_less_the_margin_the_same_key_is_resent() {
        let inside = 24 * HOUR_MS - REPLAY_MARGIN_MS;
        assert_eq!(
            decide_after_unknown(&retaining_a_day(), &sent_ago(inside)),
            RecoveryDecision::ResendSameKey
        );
    }

    #[test]
    fn past_the_idempotency_retention_less_the_margin_the_step_goes_to_review_with_the_reason() {
        let ago = 23 * HOUR_MS + 52 * 60_000;
        let decision = decide_after_unknown(&retaining_a_day(), &sent_ago(ago));
        let RecoveryDecision::Review { reason } = decision else {
            panic!("expected review, saw {decision:?}");
        };
        assert_eq!(
            reason.sentence(),
            "The provider keeps idempotency keys for 24 h and this key was first sent 23 h 52 min ago: the provider may have forgotten it, so a same-key retry could make the effect a second time."
        );
    }

    #[test]
    fn a_contract_without_a_retention_resends_however_old_the_key() {
        assert_eq!(
            decide_after_unknown(&idempotent(), &sent_ago(365 * 24 * HOUR_MS)),
            RecoveryDecision::ResendSameKey
        );
    }
}
