//! What an adapter has proven (docs/DESIGN.md §5, the trust ladder): every claim an adapter file
//! makes that decides whether a repeat is safe, how far verification has proven it, and the
//! contract the engine acts on — the declared one cut down to the claims that were proven on
//! their failure paths. A claim never provoked is unverified; one the sandbox (or production)
//! contradicted is refuted; neither permits an action or an automatic retry.

use serde::{Deserialize, Serialize};

use super::contract::{Compensation, SideEffectContract};

/// Which request an outcome rule reads the answers of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Deliver,
    Withdraw,
}

impl Operation {
    /// The operation's name in an adapter file.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Deliver => "deliver",
            Operation::Withdraw => "withdraw",
        }
    }
}

/// One claim of an adapter file; it serializes as its [`Claim::id`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Claim {
    /// The request is accepted and its answer read as a success: nothing else is trusted, and
    /// nothing is delivered, without it.
    Delivery,
    /// The same key and digest replay the original effect, also after a lost answer; the same
    /// key with another digest is refused.
    IdempotencyKey,
    /// A lookup finds exactly the effect a request made (also after a lost answer), never a
    /// declined attempt, and not a request that was never made.
    Lookup,
    /// An effect can be withdrawn, once, under its own key.
    Withdrawal,
    /// An outcome rule that reads an answer as `rejected` or `failed_before_effect`: the answer
    /// it reads means that nothing happened.
    Rule { operation: Operation, index: usize },
    /// The file's `verify.provoke[index]`: a request that must be answered as the file says.
    Provocation { index: usize },
}

impl Claim {
    /// The claim as it is stored and named in the API: `delivery`, `deliver.outcomes[2]`, …
    pub fn id(&self) -> String {
        match self {
            Claim::Delivery => "delivery".to_owned(),
            Claim::IdempotencyKey => "idempotency_key".to_owned(),
            Claim::Lookup => "lookup".to_owned(),
            Claim::Withdrawal => "withdrawal".to_owned(),
            Claim::Rule { operation, index } => format!("{}.outcomes[{index}]", operation.as_str()),
            Claim::Provocation { index } => format!("verify.provoke[{index}]"),
        }
    }

    /// The claim named `id`, as [`Claim::id`] spells it.
    pub fn parse(id: &str) -> Option<Claim> {
        let indexed = |prefix: &str| -> Option<usize> {
            id.strip_prefix(prefix)?.strip_suffix(']')?.parse().ok()
        };
        match id {
            "delivery" => Some(Claim::Delivery),
            "idempotency_key" => Some(Claim::IdempotencyKey),
            "lookup" => Some(Claim::Lookup),
            "withdrawal" => Some(Claim::Withdrawal),
            _ => {
                if let Some(index) = indexed("deliver.outcomes[") {
                    Some(Claim::Rule {
                        operation: Operation::Deliver,
                        index,
                    })
                } else if let Some(index) = indexed("withdraw.outcomes[") {
                    Some(Claim::Rule {
                        operation: Operation::Withdraw,
                        index,
                    })
                } else {
                    indexed("verify.provoke[").map(|index| Claim::Provocation { index })
                }
            }
        }
    }

    /// The claim in a few words, as people read it.
    pub fn label(&self) -> String {
        match self {
            Claim::Delivery => "delivery".to_owned(),
            Claim::IdempotencyKey => "idempotency key".to_owned(),
            Claim::Lookup => "status lookup".to_owned(),
            Claim::Withdrawal => "withdrawal".to_owned(),
            Claim::Rule { operation, index } => {
                format!("{} rule {}", operation.as_str(), index + 1)
            }
            Claim::Provocation { index } => format!("provocation {}", index + 1),
        }
    }
}

impl Serialize for Claim {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.id())
    }
}

impl<'de> Deserialize<'de> for Claim {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        Claim::parse(&id)
            .ok_or_else(|| serde::de::Error::custom(format!("`{id}` is not an adapter claim")))
    }
}

/// How far one claim is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "claim_trust", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Never provoked on its failure path (or the check could not run): it permits nothing.
    Unverified,
    /// Provoked on its failure path, and it held.
    Verified,
    /// Contradicted by the sandbox or by production: it permits nothing, and the evidence says
    /// how it failed.
    Refuted,
}

impl Trust {
    /// The word people read.
    pub fn label(self) -> &'static str {
        match self {
            Trust::Unverified => "unverified",
            Trust::Verified => "verified",
            Trust::Refuted => "refuted",
        }
    }
}

/// The contract the engine acts on: the declared one, with every capability whose claim is not
/// verified taken away. `verified` says whether a claim was proven. The unknown-outcome policy,
/// deadlines and retention stay as declared: they only ever ask for less.
pub fn trusted_contract(
    declared: &SideEffectContract,
    verified: impl Fn(&Claim) -> bool,
) -> SideEffectContract {
    SideEffectContract {
        accepts_idempotency_key: declared.accepts_idempotency_key
            && verified(&Claim::IdempotencyKey),
        query_by_client_reference: declared.query_by_client_reference && verified(&Claim::Lookup),
        create_after_authoritative_absence: declared.create_after_authoritative_absence
            && verified(&Claim::Lookup),
        compensation: match &declared.compensation {
            Compensation::SupportedWithLimits(limits) if verified(&Claim::Withdrawal) => {
                Compensation::SupportedWithLimits(limits.clone())
            }
            Compensation::SupportedWithLimits(_) | Compensation::None => Compensation::None,
        },
        ..declared.clone()
    }
}

/// The contract that speaks for a request sent under adapter version `sent` while `current` is
/// in force: `trusted` when they are one version (or nothing was sent yet), else none of the
/// claims about that request. What a later version's verification proved was proven for that
/// version's requests, not for this one (a key it adds was never on this request), so a person
/// decides with the actions that rest on no such claim, as recovery does (docs/DESIGN.md §5).
/// The withdrawal stays: withdrawing is a new request, sent under the current version, whose
/// own claim speaks for it.
pub fn for_request_sent_under(
    trusted: SideEffectContract,
    sent: Option<i32>,
    current: Option<i32>,
) -> SideEffectContract {
    match (sent, current) {
        (Some(sent), Some(current)) if sent != current => {
            trusted_contract(&trusted, |claim| *claim == Claim::Withdrawal)
        }
        _ => trusted,
    }
}

/// The contract that speaks for a compensation step's request, a withdrawal, once its outcome
/// is in doubt: none of the delivery's claims. The delivery's key was proven on lost answers of
/// deliveries; the withdrawal claim proves only that withdrawing again, with the first answer
/// read, returns the first withdrawal (no lost answer of a withdrawal was provoked); and the
/// lookup finds deliveries, so its "not found" would be blindness, not proof that nothing was
/// withdrawn. A person decides, with the actions that rest on no claim.
pub fn for_withdrawal(trusted: &SideEffectContract) -> SideEffectContract {
    SideEffectContract {
        accepts_idempotency_key: false,
        query_by_client_reference: false,
        create_after_authoritative_absence: false,
        ..trusted.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::super::contract::fixtures::{idempotent, queryable};
    use super::super::contract::{ContractKind, UnknownOutcomePolicy};
    use super::*;

    #[test]
    fn every_claim_parses_from_its_own_id() {
        let claims = [
            Claim::Delivery,
            Claim::IdempotencyKey,
            Claim::Lookup,
            Claim::Withdrawal,
            Claim::Rule {
                operation: Operation::Deliver,
                index: 3,
            },
            Claim::Rule {
                operation: Operation::Withdraw,
                index: 0,
            },
            Claim::Provocation { index: 12 },
        ];
        for claim in claims {
            assert_eq!(Claim::parse(&claim.id()), Some(claim));
        }
        assert_eq!(
            serde_json::to_value(Claim::Provocation { index: 1 }).unwrap(),
            "verify.provoke[1]"
        );
        assert_eq!(Claim::parse("deliver.outcomes[x]"), None);
        assert_eq!(Claim::parse("exactly_once"), None);
    }

    #[test]
    fn an_unproven_idempotency_claim_leaves_a_contract_without_a_key() {
        let trusted = trusted_contract(&idempotent(), |_| false);
        assert_eq!(trusted.kind(), ContractKind::Opaque);
        assert_eq!(trusted.compensation, Compensation::None);
        assert_eq!(trusted.unknown_outcome_policy, UnknownOutcomePolicy::Query);
    }

    #[test]
    fn only_the_verified_claims_of_a_contract_count() {
        let mut both = queryable();
        both.accepts_idempotency_key = true;
        let trusted = trusted_contract(&both, |c| matches!(c, Claim::Lookup));
        assert_eq!(trusted.kind(), ContractKind::Queryable);
        assert!(trusted.create_after_authoritative_absence);
        assert_eq!(trusted.compensation, Compensation::None);
        let everything = trusted_contract(&both, |_| true);
        assert_eq!(everything, both);
    }

    #[test]
    fn a_refuted_or_unverified_idempotency_claim_offers_no_same_key_retry() {
        use super::super::actions::{OperatorAction, Role, StepFacts, permitted_actions, refusal};
        use super::super::state::StepState;
        let trusted = trusted_contract(&idempotent(), |claim| *claim != Claim::IdempotencyKey);
        for state in [StepState::ReviewRequired, StepState::OutcomeUnknown] {
            let facts = StepFacts {
                state,
                contract: &trusted,
                last_lookup: None,
                request_prepared: true,
                open_incident: false,
                key_first_sent_ms_ago: None,
            };
            assert!(!permitted_actions(&facts).contains(&OperatorAction::RetrySameKey));
            assert!(refusal(&facts, Role::Approver, OperatorAction::RetrySameKey).is_some());
        }
    }

    #[test]
    fn a_not_found_from_a_lookup_that_is_not_verified_offers_neither_replace_nor_retry() {
        use super::super::actions::{OperatorAction, Role, StepFacts, permitted_actions, refusal};
        use super::super::state::StepState;
        use crate::domain::recovery::LookupAnswer;
        // Past the visibility window: from a verified lookup, proof of absence.
        let late = LookupAnswer::NotFound {
            looked_after_sent_ms: 60_000,
        };
        let trusted = trusted_contract(&queryable(), |claim| *claim != Claim::Lookup);
        assert!(!late.is_authoritative_absence(&trusted));
        let facts = StepFacts {
            state: StepState::ReviewRequired,
            contract: &trusted,
            last_lookup: Some(&late),
            request_prepared: true,
            open_incident: false,
            key_first_sent_ms_ago: None,
        };
        for action in [OperatorAction::Replace, OperatorAction::RetrySameKey] {
            assert!(!permitted_actions(&facts).contains(&action), "{action:?}");
            assert!(
                refusal(&facts, Role::Approver, action).is_some(),
                "{action:?}"
            );
        }
        assert!(late.is_authoritative_absence(&trusted_contract(&queryable(), |_| true)));
    }

    #[test]
    fn a_withdrawal_in_doubt_is_neither_resent_nor_looked_up_but_goes_to_a_person() {
        use crate::domain::recovery::{
            RecoveryDecision, UnknownOutcomeFacts, decide_after_unknown,
        };
        let facts = UnknownOutcomeFacts {
            last_lookup: None,
            recovery_deadline_passed: false,
            key_first_sent_ms_ago: None,
        };
        // A key and a lookup for deliveries, and a withdrawal claim, all verified.
        let mut declared = queryable();
        declared.accepts_idempotency_key = true;
        declared.compensation = Compensation::SupportedWithLimits("refunds".into());
        for verified in [true, false] {
            let trusted = trusted_contract(&declared, |c| verified || *c != Claim::Withdrawal);
            let withdrawal = for_withdrawal(&trusted);
            assert!(!withdrawal.query_by_client_reference);
            assert!(matches!(
                decide_after_unknown(&withdrawal, &facts),
                RecoveryDecision::Review { .. }
            ));
        }
    }

    #[test]
    fn a_verified_claim_cannot_add_what_was_never_declared() {
        let trusted = trusted_contract(&queryable(), |_| true);
        assert!(!trusted.accepts_idempotency_key);
    }
}
