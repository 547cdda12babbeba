//! Outbound limits (docs/DESIGN.md §20): how many new requests per second, and how many calls
//! in flight, may reach one adapter's provider from every worker process on the database. An
//! adapter file declares them; an approver may override them for the deployment. The claim
//! paces calls by [`schedule`]: each admitted call gets a moment to leave at, spaced so that no
//! one-second window at the destination sees more than the limit.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The highest rate and the most calls in flight a file or an override may name.
pub const MAX_REQUESTS_PER_SECOND: f64 = 10_000.0;
pub const MAX_IN_FLIGHT: u32 = 10_000;

/// Calls are spaced 20% wider than the rate asks: between a call's moment and the provider's
/// record of it, a busy machine (a descheduled worker, the provider's own queue) bunches calls
/// by up to 150 ms, and no one-second window then holds more than the limit (measured on two
/// shared cores: 10% left 102–106 calls in the busiest second at a limit of 100).
const SPACING_MARGIN: f64 = 1.20;

/// How far ahead one claim hands out moments to leave at; a call waits at most this long in
/// its worker, under its lease.
pub const HORIZON: Duration = Duration::from_secs(1);

/// How long a call waits in the queue when its adapter has every call in flight it may have.
pub const IN_FLIGHT_FULL: Duration = Duration::from_millis(250);

/// An adapter's outbound limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u32>,
}

impl Limits {
    /// No limit at all: the claim does not pace.
    pub fn is_unlimited(&self) -> bool {
        self.requests_per_second.is_none() && self.in_flight.is_none()
    }

    /// These limits with each value `over` names in their place.
    pub fn overridden_by(self, over: Limits) -> Limits {
        Limits {
            requests_per_second: over.requests_per_second.or(self.requests_per_second),
            in_flight: over.in_flight.or(self.in_flight),
        }
    }

    /// What is wrong with these values, in a sentence.
    pub fn problem(&self) -> Option<String> {
        if let Some(rps) = self.requests_per_second
            && !(rps.is_finite() && rps > 0.0 && rps <= MAX_REQUESTS_PER_SECOND)
        {
            return Some(format!(
                "requests_per_second must be above 0 and at most {MAX_REQUESTS_PER_SECOND}"
            ));
        }
        if let Some(n) = self.in_flight
            && !(1..=MAX_IN_FLIGHT).contains(&n)
        {
            return Some(format!("in_flight must be between 1 and {MAX_IN_FLIGHT}"));
        }
        None
    }

    /// The space between two calls' moments to leave at, if the rate is limited.
    fn spacing(&self) -> Option<Duration> {
        self.requests_per_second
            .map(|rps| Duration::from_secs_f64(SPACING_MARGIN / rps))
    }
}

/// In words, for the console and the command line: "4 requests a second and 2 calls in flight".
impl std::fmt::Display for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.requests_per_second, self.in_flight) {
            (None, None) => f.write_str("no limit"),
            (Some(rps), None) => write!(f, "{rps} requests a second"),
            (None, Some(n)) => write!(f, "{n} call(s) in flight"),
            (Some(rps), Some(n)) => write!(f, "{rps} requests a second and {n} call(s) in flight"),
        }
    }
}

/// Where an adapter's pace stands when a claim reads it (its row locked).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// How far after now the next call may leave (zero when it may leave at once).
    pub next_after: Duration,
    /// Calls of the adapter in flight now.
    pub in_flight: u32,
}

/// What a claim does with `wanting` calls of one adapter, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// How long after now each admitted call leaves, for the first `admitted.len()` calls.
    pub admitted: Vec<Duration>,
    /// How long the rest wait in the queue, each.
    pub postponed: Vec<Duration>,
    /// The adapter's next moment after this claim, from now.
    pub next_after: Duration,
}

/// Admits calls while the rate leaves a moment inside [`HORIZON`] and the in-flight limit a
/// place; the rest wait, staggered by the spacing so they come due in order, not all at once.
pub fn schedule(limits: Limits, pace: Pace, wanting: usize) -> Schedule {
    let places = limits.in_flight.map_or(usize::MAX, |n| {
        usize::try_from(n.saturating_sub(pace.in_flight)).unwrap_or(usize::MAX)
    });
    let spacing = limits.spacing();
    let mut next = pace.next_after;
    let mut admitted = Vec::new();
    while admitted.len() < wanting.min(places) && (spacing.is_none() || next < HORIZON) {
        admitted.push(next);
        next += spacing.unwrap_or_default();
    }
    let rest = wanting - admitted.len();
    let postponed = match spacing {
        Some(spacing) if admitted.len() < places => (0..rest)
            .map(|i| next + spacing * u32::try_from(i).unwrap_or(u32::MAX))
            .collect(),
        _ => vec![IN_FLIGHT_FULL.max(next); rest],
    };
    Schedule {
        admitted,
        postponed,
        next_after: next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(rps: f64) -> Limits {
        Limits {
            requests_per_second: Some(rps),
            in_flight: None,
        }
    }

    const IDLE: Pace = Pace {
        next_after: Duration::ZERO,
        in_flight: 0,
    };

    #[test]
    fn an_idle_adapter_admits_one_second_of_calls_spaced_wider_than_the_rate() {
        let s = schedule(rate(10.0), IDLE, 50);
        assert_eq!(s.admitted.len(), 9, "0 ms, 120 ms, … 960 ms");
        assert_eq!(s.admitted[0], Duration::ZERO);
        let gap = s.admitted[1] - s.admitted[0];
        assert!(gap > Duration::from_millis(100) && gap < Duration::from_millis(125));
        assert_eq!(s.postponed.len(), 41);
        assert!(s.postponed[0] >= s.next_after && s.postponed[1] > s.postponed[0]);
    }

    #[test]
    fn no_one_second_window_of_admitted_moments_holds_more_than_the_rate() {
        let mut next_after = Duration::ZERO;
        let mut moments = Vec::new();
        let mut elapsed = Duration::ZERO;
        for _ in 0..20 {
            let s = schedule(
                rate(7.0),
                Pace {
                    next_after,
                    in_flight: 0,
                },
                3,
            );
            moments.extend(s.admitted.iter().map(|d| elapsed + *d));
            // The next claim comes 150 ms later.
            elapsed += Duration::from_millis(150);
            next_after = s.next_after.saturating_sub(Duration::from_millis(150));
        }
        for (i, start) in moments.iter().enumerate() {
            let within = moments[i..]
                .iter()
                .take_while(|m| **m - *start <= Duration::from_secs(1))
                .count();
            assert!(within <= 7, "{within} moments in one second from {start:?}");
        }
    }

    #[test]
    fn a_full_in_flight_limit_admits_nothing_and_puts_every_call_off() {
        let limits = Limits {
            requests_per_second: None,
            in_flight: Some(4),
        };
        let s = schedule(
            limits,
            Pace {
                next_after: Duration::ZERO,
                in_flight: 4,
            },
            3,
        );
        assert!(s.admitted.is_empty());
        assert_eq!(s.postponed, vec![IN_FLIGHT_FULL; 3]);
        let s = schedule(
            limits,
            Pace {
                next_after: Duration::ZERO,
                in_flight: 2,
            },
            3,
        );
        assert_eq!(s.admitted, vec![Duration::ZERO; 2]);
        assert_eq!(s.postponed.len(), 1);
    }

    #[test]
    fn a_rate_already_booked_past_the_horizon_admits_nothing() {
        let pace = Pace {
            next_after: Duration::from_millis(1_500),
            in_flight: 0,
        };
        let s = schedule(rate(2.0), pace, 2);
        assert!(s.admitted.is_empty());
        assert_eq!(s.postponed[0], Duration::from_millis(1_500));
        assert_eq!(s.next_after, Duration::from_millis(1_500));
    }

    #[test]
    fn an_override_replaces_only_the_values_it_names() {
        let file = Limits {
            requests_per_second: Some(50.0),
            in_flight: Some(8),
        };
        let over = rate(5.0);
        assert_eq!(
            file.overridden_by(over),
            Limits {
                requests_per_second: Some(5.0),
                in_flight: Some(8)
            }
        );
        assert!(rate(0.0).problem().is_some());
        assert!(rate(f64::NAN).problem().is_some());
        assert!(file.problem().is_none());
    }
}
