//! Fault plans: scripted rules and reproducible random faults, and why a destination may
//! refuse a plan.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fault::{Fault, FaultKind, Operation};
use super::matching::Match;
use crate::config::Api;

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

    /// Checks that a destination serving `api` can obey the plan: the payments API has no
    /// "processing" answer, the webhook receiver only deliveries.
    pub fn validate_for(&self, api: Api) -> Result<(), FaultPlanError> {
        self.validate()?;
        let refuses = |operation: Operation, fault: FaultKind| match api {
            Api::Protocol => false,
            Api::Payments => fault == FaultKind::LookupProcessing,
            Api::Webhook => operation != Operation::Deliver,
        };
        let scripted = self
            .rules
            .iter()
            .map(|rule| (rule.operation, rule.fault.kind()));
        let drawn = self.random.iter().flat_map(|random| {
            [Operation::Deliver, Operation::Lookup, Operation::Withdraw]
                .into_iter()
                .flat_map(move |operation| {
                    random
                        .rates(operation)
                        .keys()
                        .map(move |&kind| (operation, kind))
                })
        });
        match scripted
            .chain(drawn)
            .find(|&(operation, fault)| refuses(operation, fault))
        {
            Some((operation, fault)) => Err(FaultPlanError::NotForApi { fault, operation }),
            None => Ok(()),
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
    /// For example `lookup_processing` at the payments destination, which has no such answer,
    /// or any fault but a delivery's at the webhook receiver, which has no other endpoint.
    #[error("a {fault} fault on {operation} requests cannot apply to this destination's API")]
    NotForApi {
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

// The checks of a fault's parameters live with the plan's errors, so fault.rs needs nothing
// from this file.
impl Fault {
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
