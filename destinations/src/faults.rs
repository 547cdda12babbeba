//! Fault plans: the script a destination obeys to lose, delay or spoil its answers.
//!
//! A fault never throws before doing anything unless it says so (`refuse`, `reject`): the
//! others let the destination commit the effect and then interfere with the answer, which is
//! the failure a mock leaves out.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The requests a fault can be aimed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// `POST /deliveries`.
    Deliver,
    /// `GET /deliveries/by-reference/{client_reference}`.
    Lookup,
    /// `POST /deliveries/{external_reference}/withdrawal`.
    Withdraw,
}

impl Operation {
    /// The name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Deliver => "deliver",
            Operation::Lookup => "lookup",
            Operation::Withdraw => "withdraw",
        }
    }

    /// Whether a fault of `kind` makes sense for this operation.
    pub fn allows(self, kind: FaultKind) -> bool {
        use FaultKind as K;
        match self {
            Operation::Deliver => matches!(
                kind,
                K::Refuse | K::Reject | K::DelayResponse | K::DropResponse | K::ErrorAfterAccept
            ),
            Operation::Lookup => matches!(
                kind,
                K::LookupUnavailable | K::LookupProcessing | K::DelayResponse | K::DropResponse
            ),
            Operation::Withdraw => matches!(
                kind,
                K::Refuse
                    | K::Reject
                    | K::WithdrawalTimeout
                    | K::WithdrawalDrop
                    | K::ErrorAfterAccept
            ),
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to one request. Serialised externally tagged: `{"drop_response": {}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Answer 503 with `accepted: false`; nothing is committed.
    Refuse {},
    /// Answer 422 with this code; nothing is committed.
    Reject {
        /// The rejection code the client sees.
        code: String,
        /// Whether the rejection says that a retry may succeed.
        retryable: bool,
    },
    /// Do the work (commit), then wait before answering.
    DelayResponse {
        /// How long to wait, in milliseconds.
        ms: u64,
    },
    /// Do the work (commit), then close the connection without sending a single byte.
    DropResponse {},
    /// Commit, then answer this 5xx status without `accepted: false`.
    ErrorAfterAccept {
        /// A status from 500 to 599.
        status: u16,
    },
    /// Answer a lookup with 503 `{"status": "unavailable"}`.
    LookupUnavailable {},
    /// Answer a lookup with `{"status": "processing"}`.
    LookupProcessing {},
    /// Commit the withdrawal, then wait before answering.
    WithdrawalTimeout {
        /// How long to wait, in milliseconds.
        ms: u64,
    },
    /// Commit the withdrawal, then close the connection without any response.
    WithdrawalDrop {},
}

impl Fault {
    /// The fault's kind, without its parameters.
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Refuse {} => FaultKind::Refuse,
            Fault::Reject { .. } => FaultKind::Reject,
            Fault::DelayResponse { .. } => FaultKind::DelayResponse,
            Fault::DropResponse {} => FaultKind::DropResponse,
            Fault::ErrorAfterAccept { .. } => FaultKind::ErrorAfterAccept,
            Fault::LookupUnavailable {} => FaultKind::LookupUnavailable,
            Fault::LookupProcessing {} => FaultKind::LookupProcessing,
            Fault::WithdrawalTimeout { .. } => FaultKind::WithdrawalTimeout,
            Fault::WithdrawalDrop {} => FaultKind::WithdrawalDrop,
        }
    }

    fn problem(&self) -> Option<FaultPlanError> {
        match self {
            Fault::Reject { code, .. } if code.is_empty() => Some(FaultPlanError::EmptyCode),
            Fault::ErrorAfterAccept { status } if !(500..=599).contains(status) => {
                Some(FaultPlanError::NotAServerError(*status))
            }
            _ => None,
        }
    }
}

/// A [`Fault`] without its parameters: the key of a random plan's rates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// [`Fault::Refuse`].
    Refuse,
    /// [`Fault::Reject`]; a random one has code `random_rejection` and is retryable.
    Reject,
    /// [`Fault::DelayResponse`] for the random plan's `delay_ms`.
    DelayResponse,
    /// [`Fault::DropResponse`].
    DropResponse,
    /// [`Fault::ErrorAfterAccept`]; a random one answers 500.
    ErrorAfterAccept,
    /// [`Fault::LookupUnavailable`].
    LookupUnavailable,
    /// [`Fault::LookupProcessing`].
    LookupProcessing,
    /// [`Fault::WithdrawalTimeout`] for the random plan's `delay_ms`.
    WithdrawalTimeout,
    /// [`Fault::WithdrawalDrop`].
    WithdrawalDrop,
}

impl FaultKind {
    /// The name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Refuse => "refuse",
            FaultKind::Reject => "reject",
            FaultKind::DelayResponse => "delay_response",
            FaultKind::DropResponse => "drop_response",
            FaultKind::ErrorAfterAccept => "error_after_accept",
            FaultKind::LookupUnavailable => "lookup_unavailable",
            FaultKind::LookupProcessing => "lookup_processing",
            FaultKind::WithdrawalTimeout => "withdrawal_timeout",
            FaultKind::WithdrawalDrop => "withdrawal_drop",
        }
    }

    fn needs_delay(self) -> bool {
        matches!(
            self,
            FaultKind::DelayResponse | FaultKind::WithdrawalTimeout
        )
    }

    /// The fault a random plan injects for this kind.
    fn instantiate(self, delay_ms: Option<u64>) -> Fault {
        let ms = delay_ms.unwrap_or_default();
        match self {
            FaultKind::Refuse => Fault::Refuse {},
            FaultKind::Reject => Fault::Reject {
                code: "random_rejection".into(),
                retryable: true,
            },
            FaultKind::DelayResponse => Fault::DelayResponse { ms },
            FaultKind::DropResponse => Fault::DropResponse {},
            FaultKind::ErrorAfterAccept => Fault::ErrorAfterAccept { status: 500 },
            FaultKind::LookupUnavailable => Fault::LookupUnavailable {},
            FaultKind::LookupProcessing => Fault::LookupProcessing {},
            FaultKind::WithdrawalTimeout => Fault::WithdrawalTimeout { ms },
            FaultKind::WithdrawalDrop => Fault::WithdrawalDrop {},
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which requests a rule applies to: `{"any": true}`, `{"idempotency_key": "…"}`,
/// `{"client_reference": "…"}` or `{"external_reference": "…"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "MatchRepr", into = "MatchRepr")]
pub enum Match {
    /// Every request of the rule's operation.
    Any,
    /// Requests carrying this `Idempotency-Key` (a withdrawal's own key for withdrawals).
    IdempotencyKey(String),
    /// Deliveries and lookups with this client reference.
    ClientReference(String),
    /// Withdrawals of this delivery.
    ExternalReference(String),
}

impl Match {
    /// Whether a request with these facts is matched.
    pub(crate) fn matches(&self, request: &Request<'_>) -> bool {
        match self {
            Match::Any => true,
            Match::IdempotencyKey(key) => request.idempotency_key == Some(key.as_str()),
            Match::ClientReference(reference) => {
                request.client_reference == Some(reference.as_str())
            }
            Match::ExternalReference(reference) => {
                request.external_reference == Some(reference.as_str())
            }
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum MatchRepr {
    Any(bool),
    IdempotencyKey(String),
    ClientReference(String),
    ExternalReference(String),
}

impl TryFrom<MatchRepr> for Match {
    type Error = &'static str;

    fn try_from(repr: MatchRepr) -> Result<Self, Self::Error> {
        match repr {
            MatchRepr::Any(true) => Ok(Match::Any),
            MatchRepr::Any(false) => Err("{\"any\": false} matches nothing; omit the rule"),
            MatchRepr::IdempotencyKey(key) => Ok(Match::IdempotencyKey(key)),
            MatchRepr::ClientReference(reference) => Ok(Match::ClientReference(reference)),
            MatchRepr::ExternalReference(reference) => Ok(Match::ExternalReference(reference)),
        }
    }
}

impl From<Match> for MatchRepr {
    fn from(matching: Match) -> Self {
        match matching {
            Match::Any => MatchRepr::Any(true),
            Match::IdempotencyKey(key) => MatchRepr::IdempotencyKey(key),
            Match::ClientReference(reference) => MatchRepr::ClientReference(reference),
            Match::ExternalReference(reference) => MatchRepr::ExternalReference(reference),
        }
    }
}

/// The facts about one well-formed request that rules match and random faults hash.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request<'a> {
    pub operation: Operation,
    pub idempotency_key: Option<&'a str>,
    pub client_reference: Option<&'a str>,
    pub external_reference: Option<&'a str>,
}

impl<'a> Request<'a> {
    /// A delivery; `idempotency_key` is the header's value, whether or not the kind uses it.
    pub fn deliver(idempotency_key: Option<&'a str>, client_reference: &'a str) -> Self {
        Request {
            operation: Operation::Deliver,
            idempotency_key,
            client_reference: Some(client_reference),
            external_reference: None,
        }
    }

    /// A lookup by client reference.
    pub fn lookup(client_reference: &'a str) -> Self {
        Request {
            operation: Operation::Lookup,
            idempotency_key: None,
            client_reference: Some(client_reference),
            external_reference: None,
        }
    }

    /// A withdrawal, with its own key.
    pub fn withdraw(idempotency_key: &'a str, external_reference: &'a str) -> Self {
        Request {
            operation: Operation::Withdraw,
            idempotency_key: Some(idempotency_key),
            client_reference: None,
            external_reference: Some(external_reference),
        }
    }

    /// What random faults count sightings of: the key if the request has one, else its
    /// client reference, else its external reference.
    pub fn subject(&self) -> &'a str {
        self.idempotency_key
            .or(self.client_reference)
            .or(self.external_reference)
            .unwrap_or_default()
    }
}

/// One scripted fault: the first rule that matches a request, and has not used up its
/// `times`, decides the request's fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRule {
    /// Which requests the rule applies to.
    #[serde(rename = "match")]
    pub matching: Match,
    /// Which operation the rule applies to.
    pub operation: Operation,
    /// What happens to a matched request.
    pub fault: Fault,
    /// How many times the rule fires before it stops; `None` for every time.
    #[serde(default)]
    pub times: Option<u32>,
}

impl FaultRule {
    /// A rule firing `fault` on every `operation` request matched by `matching`.
    pub fn new(operation: Operation, matching: Match, fault: Fault) -> Self {
        FaultRule {
            matching,
            operation,
            fault,
            times: None,
        }
    }

    /// The same rule, firing only `times` times.
    pub fn times(self, times: u32) -> Self {
        FaultRule {
            times: Some(times),
            ..self
        }
    }
}

/// Faults drawn at random, but reproducibly: each decision is a hash of the seed, the
/// operation, the request's subject (its key or reference) and how many times that subject
/// was seen for that operation, so the same seed and the same requests give the same faults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RandomFaults {
    /// Chooses the plan.
    pub seed: u64,
    /// The probability of each fault kind on a delivery; they must sum to at most 1.
    #[serde(default)]
    pub deliver: BTreeMap<FaultKind, f64>,
    /// The probability of each fault kind on a lookup.
    #[serde(default)]
    pub lookup: BTreeMap<FaultKind, f64>,
    /// The probability of each fault kind on a withdrawal.
    #[serde(default)]
    pub withdraw: BTreeMap<FaultKind, f64>,
    /// The delay of random `delay_response` and `withdrawal_timeout` faults; required when
    /// either has a rate.
    #[serde(default)]
    pub delay_ms: Option<u64>,
}

impl RandomFaults {
    /// No faults yet; add rates with [`RandomFaults::rate`].
    pub fn seeded(seed: u64) -> Self {
        RandomFaults {
            seed,
            deliver: BTreeMap::new(),
            lookup: BTreeMap::new(),
            withdraw: BTreeMap::new(),
            delay_ms: None,
        }
    }

    /// The same plan, injecting `kind` into `operation` requests with probability `rate`.
    pub fn rate(mut self, operation: Operation, kind: FaultKind, rate: f64) -> Self {
        self.rates_mut(operation).insert(kind, rate);
        self
    }

    /// The rates for one operation.
    pub fn rates(&self, operation: Operation) -> &BTreeMap<FaultKind, f64> {
        match operation {
            Operation::Deliver => &self.deliver,
            Operation::Lookup => &self.lookup,
            Operation::Withdraw => &self.withdraw,
        }
    }

    fn rates_mut(&mut self, operation: Operation) -> &mut BTreeMap<FaultKind, f64> {
        match operation {
            Operation::Deliver => &mut self.deliver,
            Operation::Lookup => &mut self.lookup,
            Operation::Withdraw => &mut self.withdraw,
        }
    }

    /// The fault for a draw in `[0, 1)`: the rates, in a fixed order, share out that interval.
    pub(crate) fn pick(&self, operation: Operation, draw: f64) -> Option<Fault> {
        let mut bound = 0.0;
        self.rates(operation).iter().find_map(|(kind, rate)| {
            bound += rate;
            (draw < bound).then(|| kind.instantiate(self.delay_ms))
        })
    }

    fn problem(&self) -> Option<FaultPlanError> {
        [Operation::Deliver, Operation::Lookup, Operation::Withdraw]
            .into_iter()
            .find_map(|operation| {
                let rates = self.rates(operation);
                let mut total = 0.0;
                for (&fault, &rate) in rates {
                    if !operation.allows(fault) {
                        return Some(FaultPlanError::NotForOperation { fault, operation });
                    }
                    if !(0.0..=1.0).contains(&rate) {
                        return Some(FaultPlanError::Rate {
                            fault,
                            operation,
                            rate,
                        });
                    }
                    if fault.needs_delay() && self.delay_ms.is_none() {
                        return Some(FaultPlanError::MissingDelay { fault });
                    }
                    total += rate;
                }
                (total > 1.0).then_some(FaultPlanError::RatesAboveOne { operation, total })
            })
    }
}

/// Everything a destination is told to do wrong. The default plan does nothing wrong.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultPlan {
    /// Scripted faults, tried in order before any random one.
    #[serde(default)]
    pub rules: Vec<FaultRule>,
    /// Faults for requests no rule matched.
    #[serde(default)]
    pub random: Option<RandomFaults>,
}

impl FaultPlan {
    /// A plan of just these rules.
    pub fn rules(rules: impl IntoIterator<Item = FaultRule>) -> Self {
        FaultPlan {
            rules: rules.into_iter().collect(),
            random: None,
        }
    }

    /// A plan of just these random faults.
    pub fn random(random: RandomFaults) -> Self {
        FaultPlan {
            rules: Vec::new(),
            random: Some(random),
        }
    }

    /// Checks that the destination can obey the plan.
    pub fn validate(&self) -> Result<(), FaultPlanError> {
        for rule in &self.rules {
            let fault = rule.fault.kind();
            if !rule.operation.allows(fault) {
                return Err(FaultPlanError::NotForOperation {
                    fault,
                    operation: rule.operation,
                });
            }
            if let Some(problem) = rule.fault.problem() {
                return Err(problem);
            }
        }
        match self.random.as_ref().and_then(RandomFaults::problem) {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    }
}

/// Why a destination cannot obey a fault plan.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FaultPlanError {
    /// For example `lookup_unavailable` aimed at deliveries.
    #[error("a {fault} fault cannot apply to {operation} requests")]
    NotForOperation {
        /// The misplaced fault.
        fault: FaultKind,
        /// The operation it was aimed at.
        operation: Operation,
    },
    /// `error_after_accept` must answer a 5xx status.
    #[error("error_after_accept needs a status from 500 to 599, not {0}")]
    NotAServerError(u16),
    /// A rejection needs a code.
    #[error("a reject fault needs a non-empty code")]
    EmptyCode,
    /// A probability outside `[0, 1]`.
    #[error("the {operation} rate of {fault} must be between 0 and 1, not {rate}")]
    Rate {
        /// The fault with the bad rate.
        fault: FaultKind,
        /// Its operation.
        operation: Operation,
        /// The bad rate.
        rate: f64,
    },
    /// The rates of one operation add up to more than certainty.
    #[error("the {operation} rates add up to {total}, more than 1")]
    RatesAboveOne {
        /// The operation.
        operation: Operation,
        /// The sum of its rates.
        total: f64,
    },
    /// A random delay with no `delay_ms`.
    #[error("random {fault} faults need delay_ms")]
    MissingDelay {
        /// The delaying fault.
        fault: FaultKind,
    },
}

/// What a destination's fault script has done since it was installed (`GET /control/faults`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultReport {
    /// The rules, each with how many times it fired.
    pub rules: Vec<RuleReport>,
    /// The random plan, if any.
    pub random: Option<RandomFaults>,
    /// The most recent fired faults (up to [`FIRED_LOG_LIMIT`]), oldest first.
    pub fired: Vec<FiredFault>,
}

/// How many fired faults a [`FaultReport`] remembers.
pub const FIRED_LOG_LIMIT: usize = 1000;

/// A rule of the installed plan and its use so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleReport {
    /// The rule as installed.
    #[serde(flatten)]
    pub rule: FaultRule,
    /// How many requests it has disrupted.
    pub fired: u32,
}

/// One disrupted request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FiredFault {
    /// The request's operation.
    pub operation: Operation,
    /// The request's key or reference (see [`RandomFaults`]).
    pub subject: String,
    /// How many requests of this operation had this subject, this one included.
    pub sighting: u64,
    /// The fault injected.
    pub fault: Fault,
    /// Where the fault came from.
    pub source: FaultSource,
}

/// Where a fired fault came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultSource {
    /// The rule at this index of the plan.
    Rule(usize),
    /// The random plan.
    Random,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_plan_reads_the_way_the_protocol_writes_it() {
        let plan: FaultPlan = serde_json::from_value(json!({
            "rules": [
                {"match": {"any": true}, "operation": "deliver",
                 "fault": {"drop_response": {}}, "times": 1},
                {"match": {"idempotency_key": "k"}, "operation": "withdraw",
                 "fault": {"withdrawal_timeout": {"ms": 50}}, "times": null},
            ],
            "random": {"seed": 7, "deliver": {"refuse": 0.25}, "delay_ms": 10},
        }))
        .unwrap();
        assert_eq!(
            plan.rules[0],
            FaultRule::new(Operation::Deliver, Match::Any, Fault::DropResponse {}).times(1)
        );
        assert_eq!(plan.rules[1].matching, Match::IdempotencyKey("k".into()));
        assert_eq!(
            plan.random.as_ref().unwrap().deliver[&FaultKind::Refuse],
            0.25
        );
        assert_eq!(plan.validate(), Ok(()));

        let written = serde_json::to_value(&plan.rules[0]).unwrap();
        assert_eq!(written["match"], json!({"any": true}));
        assert_eq!(written["fault"], json!({"drop_response": {}}));
    }

    #[test]
    fn any_false_is_not_a_match() {
        let rule = serde_json::from_value::<FaultRule>(json!({
            "match": {"any": false}, "operation": "deliver", "fault": {"refuse": {}}
        }));
        assert!(rule.is_err());
    }

    #[test]
    fn a_lookup_fault_cannot_be_aimed_at_deliveries() {
        let plan = FaultPlan::rules([FaultRule::new(
            Operation::Deliver,
            Match::Any,
            Fault::LookupUnavailable {},
        )]);
        assert_eq!(
            plan.validate(),
            Err(FaultPlanError::NotForOperation {
                fault: FaultKind::LookupUnavailable,
                operation: Operation::Deliver
            })
        );
    }

    #[test]
    fn an_error_after_accept_must_be_a_server_error() {
        let plan = FaultPlan::rules([FaultRule::new(
            Operation::Deliver,
            Match::Any,
            Fault::ErrorAfterAccept { status: 404 },
        )]);
        assert_eq!(plan.validate(), Err(FaultPlanError::NotAServerError(404)));
    }

    #[test]
    fn random_rates_must_not_exceed_certainty() {
        let random = RandomFaults::seeded(1)
            .rate(Operation::Deliver, FaultKind::Refuse, 0.75)
            .rate(Operation::Deliver, FaultKind::DropResponse, 0.5);
        assert!(matches!(
            FaultPlan::random(random).validate(),
            Err(FaultPlanError::RatesAboveOne { .. })
        ));
    }

    #[test]
    fn random_delays_need_a_duration() {
        let random =
            RandomFaults::seeded(1).rate(Operation::Deliver, FaultKind::DelayResponse, 0.1);
        assert_eq!(
            FaultPlan::random(random).validate(),
            Err(FaultPlanError::MissingDelay {
                fault: FaultKind::DelayResponse
            })
        );
    }

    #[test]
    fn rates_share_out_the_unit_interval_in_a_fixed_order() {
        let random = RandomFaults::seeded(1)
            .rate(Operation::Deliver, FaultKind::DropResponse, 0.5)
            .rate(Operation::Deliver, FaultKind::Refuse, 0.25);
        assert_eq!(random.pick(Operation::Deliver, 0.1), Some(Fault::Refuse {}));
        assert_eq!(
            random.pick(Operation::Deliver, 0.3),
            Some(Fault::DropResponse {})
        );
        assert_eq!(random.pick(Operation::Deliver, 0.8), None);
        assert_eq!(random.pick(Operation::Lookup, 0.1), None);
    }
}
