//! The fault plan in force, kept in memory, and the decision it makes for each request.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};

use crate::config::Api;
use crate::faults::{
    FIRED_LOG_LIMIT, Fault, FaultPlan, FaultPlanError, FaultReport, FaultSource, FiredFault,
    Operation, Request, RuleReport,
};

/// A destination's fault script; clones share it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Faults(Arc<Mutex<Script>>);

#[derive(Debug, Default)]
struct Script {
    plan: FaultPlan,
    /// How many times each rule of `plan` fired.
    fired: Vec<u32>,
    /// How many requests of each operation carried each subject.
    sightings: HashMap<(Operation, String), u64>,
    log: VecDeque<FiredFault>,
}

impl Faults {
    /// Replaces the plan, forgetting everything the previous one did, so installing the same
    /// plan again replays the same faults for the same requests.
    pub fn install(&self, plan: FaultPlan, api: Api) -> Result<(), FaultPlanError> {
        plan.validate_for(api)?;
        *self.script() = Script {
            fired: vec![0; plan.rules.len()],
            plan,
            ..Script::default()
        };
        Ok(())
    }

    /// Removes every fault.
    pub fn clear(&self) {
        *self.script() = Script::default();
    }

    /// The plan and what it has done.
    pub fn report(&self) -> FaultReport {
        let script = self.script();
        FaultReport {
            rules: script
                .plan
                .rules
                .iter()
                .zip(&script.fired)
                .map(|(rule, &fired)| RuleReport {
                    rule: rule.clone(),
                    fired,
                })
                .collect(),
            random: script.plan.random.clone(),
            fired: script.log.iter().cloned().collect(),
        }
    }

    /// The fault for one well-formed request, if any; counts it against the rule's `times`.
    pub fn decide(&self, request: &Request<'_>) -> Option<Fault> {
        self.script().decide(request)
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        // The script is consistent after every statement, so a panic elsewhere cannot have
        // left it half-updated.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Script {
    fn decide(&mut self, request: &Request<'_>) -> Option<Fault> {
        let subject = request.subject();
        let sighting = self
            .sightings
            .entry((request.operation, subject.to_owned()))
            .or_default();
        *sighting += 1;
        let sighting = *sighting;

        let (fault, source) = self
            .scripted(request)
            .or_else(|| self.drawn(request, sighting))?;

        if self.log.len() == FIRED_LOG_LIMIT {
            self.log.pop_front();
        }
        self.log.push_back(FiredFault {
            operation: request.operation,
            subject: subject.to_owned(),
            sighting,
            fault: fault.clone(),
            source,
        });
        Some(fault)
    }

    /// The fault of the first matching rule with firings left, counted as fired.
    fn scripted(&mut self, request: &Request<'_>) -> Option<(Fault, FaultSource)> {
        let (index, rule) = self.plan.rules.iter().enumerate().find(|(index, rule)| {
            rule.operation == request.operation
                && rule.times.is_none_or(|times| self.fired[*index] < times)
                && rule.matching.matches(request)
        })?;
        self.fired[index] += 1;
        Some((rule.fault.clone(), FaultSource::Rule(index)))
    }

    /// The random plan's fault for this sighting of the request's subject.
    fn drawn(&self, request: &Request<'_>, sighting: u64) -> Option<(Fault, FaultSource)> {
        let random = self.plan.random.as_ref()?;
        let draw = draw(random.seed, request.operation, request.subject(), sighting);
        Some((random.pick(request.operation, draw)?, FaultSource::Random))
    }
}

/// A number in `[0, 1)` determined by the seed, the operation, the subject and its sighting —
/// never by the clock or a thread's random generator.
fn draw(seed: u64, operation: Operation, subject: &str, sighting: u64) -> f64 {
    let hash = Sha256::new()
        .chain_update(seed.to_be_bytes())
        .chain_update(operation.as_str())
        .chain_update([0])
        .chain_update(subject)
        .chain_update([0])
        .chain_update(sighting.to_be_bytes())
        .finalize();
    let bits = u64::from_be_bytes(hash[..8].try_into().expect("a sha256 hash has 8 bytes"));
    // The top 53 bits fill an f64's mantissa exactly.
    (bits >> 11) as f64 / (1_u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::{FaultKind, FaultRule, Match, RandomFaults};

    fn drops_half(seed: u64) -> FaultPlan {
        FaultPlan::random(RandomFaults::seeded(seed).rate(
            Operation::Deliver,
            FaultKind::DropResponse,
            0.5,
        ))
    }

    fn decisions(faults: &Faults) -> Vec<bool> {
        (0..40)
            .map(|i| {
                let reference = format!("r-{}", i % 8);
                faults.decide(&Request::deliver(None, &reference)).is_some()
            })
            .collect()
    }

    #[test]
    fn the_same_seed_replays_the_same_faults() {
        let faults = Faults::default();
        faults.install(drops_half(7), Api::Protocol).unwrap();
        let first = decisions(&faults);
        faults.install(drops_half(7), Api::Protocol).unwrap();
        assert_eq!(decisions(&faults), first);
        assert!(first.contains(&true) && first.contains(&false));
    }

    #[test]
    fn another_seed_gives_other_faults() {
        let faults = Faults::default();
        faults.install(drops_half(7), Api::Protocol).unwrap();
        let seven = decisions(&faults);
        faults.install(drops_half(8), Api::Protocol).unwrap();
        assert_ne!(decisions(&faults), seven);
    }

    #[test]
    fn repeated_requests_draw_afresh_each_time() {
        let faults = Faults::default();
        faults.install(drops_half(7), Api::Protocol).unwrap();
        let again: Vec<bool> = (0..40)
            .map(|_| faults.decide(&Request::deliver(Some("k"), "r")).is_some())
            .collect();
        assert!(again.contains(&true) && again.contains(&false));
        let sightings: Vec<u64> = faults.report().fired.iter().map(|f| f.sighting).collect();
        assert!(sightings.is_sorted() && sightings.iter().all(|&s| (1..=40).contains(&s)));
    }

    #[test]
    fn a_rule_stops_after_its_times_and_gives_way_to_the_next() {
        let faults = Faults::default();
        let plan = FaultPlan::rules([
            FaultRule::new(Operation::Deliver, Match::Any, Fault::Refuse {}).times(2),
            FaultRule::new(
                Operation::Deliver,
                Match::ClientReference("r".into()),
                Fault::DropResponse {},
            ),
        ]);
        faults.install(plan, Api::Protocol).unwrap();
        let request = Request::deliver(None, "r");
        let other = Request::deliver(None, "other");
        assert_eq!(faults.decide(&request), Some(Fault::Refuse {}));
        assert_eq!(faults.decide(&other), Some(Fault::Refuse {}));
        assert_eq!(faults.decide(&other), None);
        assert_eq!(faults.decide(&request), Some(Fault::DropResponse {}));
        assert_eq!(faults.decide(&Request::lookup("r")), None);

        let report = faults.report();
        assert_eq!(report.rules[0].fired, 2);
        assert_eq!(report.rules[1].fired, 1);
        assert_eq!(report.fired.len(), 3);
    }

    #[test]
    fn clearing_removes_every_fault() {
        let faults = Faults::default();
        faults.install(drops_half(7), Api::Protocol).unwrap();
        faults.clear();
        assert!(decisions(&faults).iter().all(|faulted| !faulted));
        assert_eq!(faults.report(), FaultReport::default());
    }
}
