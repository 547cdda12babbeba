//! What people may do with a step: the recovery decision table's "operator actions" column,
//! filtered by state and role. One function draws the console's buttons and guards the server
//! functions that perform them, inside their transaction.

use serde::{Deserialize, Serialize};

use super::contract::{Compensation, ContractKind, SideEffectContract};
use super::recovery::LookupAnswer;
use super::state::StepState;

/// An action a person can take in the recovery console. There is no "force success".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "operator_action", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum OperatorAction {
    /// Ask the destination by client reference.
    CheckDestination,
    /// Send again with the same request key and digest.
    RetrySameKey,
    /// Record an external reference found by other means, with evidence and a reason.
    AttachEvidence,
    /// Accept the residual uncertainty, naming it.
    Waive,
    /// Allow one more attempt under an opaque adapter, acknowledging the duplicate risk.
    AuthorizeAnotherAttempt,
    /// Stop future work (or, after a receipt, request withdrawal).
    Cancel,
    /// Create a replacement step with corrected input and a new request key.
    Replace,
    /// Name the canonical result of a duplicate-effect incident and the duplicate's disposition.
    ResolveIncident,
}

impl OperatorAction {
    /// The button label.
    pub fn label(self) -> &'static str {
        match self {
            OperatorAction::CheckDestination => "Check destination",
            OperatorAction::RetrySameKey => "Retry with the same key",
            OperatorAction::AttachEvidence => "Attach evidence",
            OperatorAction::Waive => "Waive",
            OperatorAction::AuthorizeAnotherAttempt => "Authorize another attempt",
            OperatorAction::Cancel => "Cancel",
            OperatorAction::Replace => "Replace with corrected input",
            OperatorAction::ResolveIncident => "Resolve incident",
        }
    }

    /// The action's name in forms, the audit log and the database (`retry_same_key`).
    pub fn name(self) -> &'static str {
        match self {
            OperatorAction::CheckDestination => "check_destination",
            OperatorAction::RetrySameKey => "retry_same_key",
            OperatorAction::AttachEvidence => "attach_evidence",
            OperatorAction::Waive => "waive",
            OperatorAction::AuthorizeAnotherAttempt => "authorize_another_attempt",
            OperatorAction::Cancel => "cancel",
            OperatorAction::Replace => "replace",
            OperatorAction::ResolveIncident => "resolve_incident",
        }
    }

    /// The least role that may take this action.
    pub fn required_role(self) -> Role {
        match self {
            OperatorAction::CheckDestination
            | OperatorAction::RetrySameKey
            | OperatorAction::AttachEvidence => Role::Operator,
            OperatorAction::Waive
            | OperatorAction::AuthorizeAnotherAttempt
            | OperatorAction::Cancel
            | OperatorAction::Replace
            | OperatorAction::ResolveIncident => Role::Approver,
        }
    }
}

/// The most rows one bulk run takes: the preview shows no more, and a run is refused beyond.
pub const BULK_MAX_ROWS: usize = 500;

/// The actions that may run in bulk: those that need nothing but a reason (and, for a
/// waiver, one residual-uncertainty sentence for every row). Evidence, replacements and
/// authorizations of another attempt are decided one step at a time.
pub const BULK_ACTIONS: [OperatorAction; 4] = [
    OperatorAction::CheckDestination,
    OperatorAction::RetrySameKey,
    OperatorAction::Waive,
    OperatorAction::Cancel,
];

/// What a signed-in person may do. Ordered: each role may do what the one before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "runtime", derive(sqlx::Type))]
#[cfg_attr(
    feature = "runtime",
    sqlx(type_name = "role", rename_all = "snake_case")
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads everything, changes nothing.
    Viewer,
    /// Checks destinations, retries with the same key, attaches evidence.
    Operator,
    /// Also waives, authorizes another attempt, resolves incidents, cancels and replaces.
    Approver,
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "operator" => Ok(Role::Operator),
            "approver" => Ok(Role::Approver),
            other => Err(format!(
                "`{other}` is not a role: use viewer, operator or approver"
            )),
        }
    }
}

impl Role {
    /// The role's name, as `FromStr` reads it and the database stores it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Approver => "approver",
        }
    }

    /// Whether this role may take `action` at all (the contract decides the rest).
    pub fn may(self, action: OperatorAction) -> bool {
        self >= action.required_role()
    }
}

/// The facts about one step that decide which actions its contract permits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFacts<'a> {
    pub state: StepState,
    pub contract: &'a SideEffectContract,
    /// The latest lookup answer since the request was last sent.
    pub last_lookup: Option<&'a LookupAnswer>,
    /// A request identity has been persisted (the step reached `invoking` at least once), or
    /// the step was restored from a backup and its request can be regenerated.
    pub request_prepared: bool,
    /// The step has an open duplicate-effect (integrity) incident.
    pub open_incident: bool,
    /// How long ago the request key was first sent, when known: past the contract's
    /// idempotency retention less the margin, "Retry with the same key" is not offered.
    pub key_first_sent_ms_ago: Option<u64>,
}

/// The actions the contract permits for this step in this state, in the order the console
/// offers them (evidence-gathering first, the dangerous ones last).
pub fn permitted_actions(facts: &StepFacts<'_>) -> Vec<OperatorAction> {
    use OperatorAction as A;
    let contract = facts.contract;
    let mut actions = Vec::new();
    match facts.state {
        StepState::OutcomeUnknown | StepState::ReviewRequired => {
            let absence_is_authoritative = facts
                .last_lookup
                .is_some_and(|answer| answer.is_authoritative_absence(contract));
            if contract.query_by_client_reference {
                actions.push(A::CheckDestination);
            }
            match contract.kind() {
                ContractKind::Idempotent => {
                    if !contract.idempotency_key_expired(facts.key_first_sent_ms_ago) {
                        actions.push(A::RetrySameKey);
                    }
                }
                ContractKind::Queryable => {
                    if absence_is_authoritative && contract.create_after_authoritative_absence {
                        actions.push(A::RetrySameKey);
                    }
                }
                ContractKind::Opaque => {}
            }
            // A manual receipt names the request it proves: one persisted before the call, or
            // (after a restore) one regenerated exactly as the live system sent it.
            if facts.request_prepared {
                actions.push(A::AttachEvidence);
            }
            actions.push(A::Waive);
            if contract.kind() == ContractKind::Opaque {
                actions.push(A::AuthorizeAnotherAttempt);
            }
            if absence_is_authoritative {
                actions.push(A::Replace);
            }
            actions.push(A::Cancel);
        }
        StepState::Rejected => actions.push(A::Replace),
        // Nothing was sent under any attempt: sending again risks no duplicate, whatever the
        // contract, and a corrected input may be what it needs.
        StepState::Unsent => {
            actions.push(A::RetrySameKey);
            actions.push(A::Replace);
            actions.push(A::Cancel);
        }
        StepState::Blocked | StepState::Ready | StepState::Held => actions.push(A::Cancel),
        StepState::Succeeded => {
            if matches!(contract.compensation, Compensation::SupportedWithLimits(_)) {
                actions.push(A::Cancel);
            }
        }
        StepState::Running | StepState::Invoking | StepState::Waived | StepState::Cancelled => {}
    }
    if facts.open_incident {
        actions.push(A::ResolveIncident);
    }
    actions
}

/// Why an action is refused, in words a person can act on.
pub fn refusal(facts: &StepFacts<'_>, role: Role, action: OperatorAction) -> Option<String> {
    if !role.may(action) {
        return Some(format!(
            "{} needs the {:?} role; you are signed in as {:?}.",
            action.label(),
            action.required_role(),
            role
        ));
    }
    if permitted_actions(facts).contains(&action) {
        return None;
    }
    if action == OperatorAction::RetrySameKey
        && let Some(why) = facts
            .contract
            .idempotency_expiry_sentence(facts.key_first_sent_ms_ago)
    {
        return Some(format!("{} is not permitted. {why}", action.label()));
    }
    Some(format!(
        "{} is not permitted for a step that is {} under an adapter with {}.",
        action.label(),
        facts.state.label().to_lowercase(),
        facts.contract.capabilities_summary()
    ))
}

#[cfg(test)]
mod tests {
    use super::super::contract::UnknownOutcomePolicy;
    use super::super::contract::fixtures::{idempotent, opaque, queryable};
    use super::*;
    use OperatorAction as A;

    fn facts<'a>(
        state: StepState,
        contract: &'a SideEffectContract,
        last_lookup: Option<&'a LookupAnswer>,
    ) -> StepFacts<'a> {
        StepFacts {
            state,
            contract,
            last_lookup,
            request_prepared: true,
            open_incident: false,
            key_first_sent_ms_ago: None,
        }
    }

    #[test]
    fn an_unknown_step_under_an_idempotent_adapter_offers_same_key_retry_first() {
        let c = idempotent();
        assert_eq!(
            permitted_actions(&facts(StepState::ReviewRequired, &c, None)),
            vec![A::RetrySameKey, A::AttachEvidence, A::Waive, A::Cancel]
        );
    }

    #[test]
    fn a_queryable_adapter_offers_check_destination_and_retry_only_after_authoritative_absence() {
        let c = queryable();
        let early = LookupAnswer::NotFound {
            looked_after_sent_ms: 10,
        };
        let late = LookupAnswer::NotFound {
            looked_after_sent_ms: 60_000,
        };
        assert_eq!(
            permitted_actions(&facts(StepState::ReviewRequired, &c, Some(&early))),
            vec![A::CheckDestination, A::AttachEvidence, A::Waive, A::Cancel]
        );
        assert_eq!(
            permitted_actions(&facts(StepState::ReviewRequired, &c, Some(&late))),
            vec![
                A::CheckDestination,
                A::RetrySameKey,
                A::AttachEvidence,
                A::Waive,
                A::Replace,
                A::Cancel
            ]
        );
    }

    #[test]
    fn authoritative_absence_offers_no_retry_when_the_contract_forbids_creating_again() {
        let mut c = queryable();
        c.create_after_authoritative_absence = false;
        let late = LookupAnswer::NotFound {
            looked_after_sent_ms: 60_000,
        };
        assert!(
            !permitted_actions(&facts(StepState::ReviewRequired, &c, Some(&late)))
                .contains(&A::RetrySameKey)
        );
    }

    #[test]
    fn an_opaque_adapter_never_offers_retry_only_a_deliberate_authorization() {
        let c = opaque();
        let actions = permitted_actions(&facts(StepState::ReviewRequired, &c, None));
        assert!(!actions.contains(&A::RetrySameKey));
        assert!(!actions.contains(&A::CheckDestination));
        assert_eq!(
            actions,
            vec![
                A::AttachEvidence,
                A::Waive,
                A::AuthorizeAnotherAttempt,
                A::Cancel
            ]
        );
    }

    #[test]
    fn a_review_policy_keeps_the_row_the_contract_would_have_had() {
        let mut c = idempotent();
        c.unknown_outcome_policy = UnknownOutcomePolicy::Review;
        assert!(
            permitted_actions(&facts(StepState::ReviewRequired, &c, None))
                .contains(&A::RetrySameKey)
        );
    }

    #[test]
    fn a_succeeded_step_offers_no_recovery_and_cancel_only_as_withdrawal() {
        let c = idempotent();
        assert_eq!(
            permitted_actions(&facts(StepState::Succeeded, &c, None)),
            vec![A::Cancel]
        );
        let mut no_withdrawal = idempotent();
        no_withdrawal.compensation = Compensation::None;
        assert!(permitted_actions(&facts(StepState::Succeeded, &no_withdrawal, None)).is_empty());
    }

    #[test]
    fn a_rejected_step_can_only_be_replaced() {
        assert_eq!(
            permitted_actions(&facts(StepState::Rejected, &opaque(), None)),
            vec![A::Replace]
        );
    }

    #[test]
    fn a_step_that_was_never_sent_may_be_sent_again_under_any_contract() {
        for contract in [opaque(), queryable(), idempotent()] {
            assert_eq!(
                permitted_actions(&facts(StepState::Unsent, &contract, None)),
                vec![A::RetrySameKey, A::Replace, A::Cancel]
            );
        }
    }

    #[test]
    fn a_held_step_can_only_be_cancelled() {
        assert_eq!(
            permitted_actions(&facts(StepState::Held, &idempotent(), None)),
            vec![A::Cancel]
        );
    }

    #[test]
    fn a_step_in_flight_offers_nothing() {
        for state in [StepState::Running, StepState::Invoking] {
            assert!(permitted_actions(&facts(state, &idempotent(), None)).is_empty());
        }
    }

    #[test]
    fn an_open_incident_can_be_resolved_in_any_state() {
        let c = idempotent();
        let mut f = facts(StepState::Succeeded, &c, None);
        f.open_incident = true;
        assert!(permitted_actions(&f).contains(&A::ResolveIncident));
    }

    #[test]
    fn an_action_is_named_as_it_serializes() {
        for action in [
            A::CheckDestination,
            A::RetrySameKey,
            A::AttachEvidence,
            A::Waive,
            A::AuthorizeAnotherAttempt,
            A::Cancel,
            A::Replace,
            A::ResolveIncident,
        ] {
            assert_eq!(serde_json::to_value(action).unwrap(), action.name());
        }
    }

    #[test]
    fn roles_are_checked_before_the_contract() {
        let c = opaque();
        let f = facts(StepState::ReviewRequired, &c, None);
        assert!(refusal(&f, Role::Viewer, A::AttachEvidence).is_some());
        assert_eq!(refusal(&f, Role::Operator, A::AttachEvidence), None);
        assert!(
            refusal(&f, Role::Operator, A::AuthorizeAnotherAttempt)
                .unwrap()
                .contains("Approver")
        );
        assert_eq!(
            refusal(&f, Role::Approver, A::AuthorizeAnotherAttempt),
            None
        );
        assert!(
            refusal(&f, Role::Approver, A::RetrySameKey)
                .unwrap()
                .contains("not permitted")
        );
    }

    #[test]
    fn no_state_and_contract_ever_permits_retry_under_an_opaque_adapter() {
        let c = opaque();
        let lookups = [
            None,
            Some(LookupAnswer::NotFound {
                looked_after_sent_ms: i64::MAX,
            }),
        ];
        // Every state in which a request may have left: an unsent step never sent one.
        for state in StepState::ALL
            .into_iter()
            .filter(|s| *s != StepState::Unsent)
        {
            for lookup in &lookups {
                let f = facts(state, &c, lookup.as_ref());
                assert!(
                    !permitted_actions(&f).contains(&A::RetrySameKey),
                    "{state:?}"
                );
            }
        }
    }

    #[test]
    fn past_the_idempotency_retention_a_same_key_retry_is_neither_offered_nor_allowed() {
        let c = SideEffectContract {
            idempotency_retention_ms: Some(24 * 3_600_000),
            ..idempotent()
        };
        let inside = StepFacts {
            key_first_sent_ms_ago: Some(60_000),
            ..facts(StepState::ReviewRequired, &c, None)
        };
        assert!(permitted_actions(&inside).contains(&A::RetrySameKey));
        let past = StepFacts {
            key_first_sent_ms_ago: Some(23 * 3_600_000 + 52 * 60_000),
            ..facts(StepState::ReviewRequired, &c, None)
        };
        assert_eq!(
            permitted_actions(&past),
            vec![A::AttachEvidence, A::Waive, A::Cancel]
        );
        let refused = refusal(&past, Role::Approver, A::RetrySameKey).unwrap();
        assert!(
            refused.contains("first sent 23 h 52 min ago: the provider may have forgotten it, so a same-key retry could make the effect a second time"),
            "{refused}"
        );
    }
}
