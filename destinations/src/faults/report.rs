//! What a destination's fault script has done: each rule's use and the faults fired.

use serde::{Deserialize, Serialize};

use super::fault::{Fault, Operation};
use super::plan::{FaultRule, RandomFaults};

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
