//! Fault plans: the script a destination obeys to lose, delay or spoil its answers.
//!
//! A fault never throws before doing anything unless it says so (`refuse`, `reject`): the
//! others let the destination commit the effect and then interfere with the answer, which is
//! the failure a mock leaves out.

mod fault;
mod matching;
mod plan;
mod report;

pub use fault::{Fault, FaultKind, Operation};
pub use matching::Match;
pub(crate) use matching::Request;
pub use plan::{FaultPlan, FaultPlanError, FaultRule, RandomFaults};
pub use report::{FIRED_LOG_LIMIT, FaultReport, FaultSource, FiredFault, RuleReport};
