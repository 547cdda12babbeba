//! The sign-in limiter this process keeps in memory (docs/DESIGN.md §15): token buckets per
//! address, an IPv6 address counted by its /64 (what one subscriber is usually given), and one
//! bucket for every attempt together. It runs before anything reaches the database, so a flood
//! of attempts writes no row and runs no Argon2; the database's own throttling (in
//! [`super::throttle`]) still decides for the attempts it admits.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Instant;

/// Attempts one address may make at once, and how many it regains each second (10 a minute).
const PER_ADDRESS_BURST: f64 = 10.0;
const PER_ADDRESS_PER_SECOND: f64 = 10.0 / 60.0;
/// Attempts this process admits at once from everyone, and each second.
const ALL_BURST: f64 = 100.0;
const ALL_PER_SECOND: f64 = 30.0;
/// The most addresses remembered; past it, full buckets are forgotten first, and then any
/// new address waits until some are.
const MAX_ADDRESSES: usize = 50_000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Self {
        Bucket {
            tokens: burst,
            at: now,
        }
    }

    /// Takes one token if there is one; else the seconds until there is.
    fn take(&mut self, burst: f64, per_second: f64, now: Instant) -> Result<(), i64> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_second).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            // At least one second: the refusal says "try again in N seconds".
            Err((((1.0 - self.tokens) / per_second).ceil() as i64).max(1))
        }
    }

    fn is_full(&self, burst: f64, per_second: f64, now: Instant) -> bool {
        self.tokens + now.saturating_duration_since(self.at).as_secs_f64() * per_second >= burst
    }
}

struct Limiter {
    all: Bucket,
    by_address: HashMap<String, Bucket>,
}

static LIMITER: LazyLock<Mutex<Limiter>> = LazyLock::new(|| {
    Mutex::new(Limiter {
        all: Bucket::full(ALL_BURST, Instant::now()),
        by_address: HashMap::new(),
    })
});

/// What an address counts as: an IPv6 address by its /64, anything else as written.
fn key_of(address: &str) -> String {
    match address.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
        }
        Ok(IpAddr::V6(v6)) => v6
            .to_ipv4_mapped()
            .map_or_else(String::new, |v4| v4.to_string()),
        _ => address.to_owned(),
    }
}

/// Admits one sign-in attempt from `address`, or says in how many seconds it may come back.
/// An unknown address ([`super::UNKNOWN_ADDRESS`]) and a loopback one (this machine: a person
/// on it, or a proxy in front that was not declared) are held only by the bucket of all
/// attempts.
pub(super) fn admit(address: &str) -> Result<(), i64> {
    admit_at(address, Instant::now())
}

fn admit_at(address: &str, now: Instant) -> Result<(), i64> {
    let mut limiter = LIMITER.lock().unwrap_or_else(PoisonError::into_inner);
    let loopback = address.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if address != super::UNKNOWN_ADDRESS && !loopback {
        let key = key_of(address);
        if !limiter.by_address.contains_key(&key) && limiter.by_address.len() >= MAX_ADDRESSES {
            limiter
                .by_address
                .retain(|_, b| !b.is_full(PER_ADDRESS_BURST, PER_ADDRESS_PER_SECOND, now));
            if limiter.by_address.len() >= MAX_ADDRESSES {
                return Err(60);
            }
        }
        limiter
            .by_address
            .entry(key)
            .or_insert_with(|| Bucket::full(PER_ADDRESS_BURST, now))
            .take(PER_ADDRESS_BURST, PER_ADDRESS_PER_SECOND, now)?;
    }
    limiter.all.take(ALL_BURST, ALL_PER_SECOND, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_past_its_burst_waits_and_another_in_its_slash_64_waits_with_it() {
        let now = Instant::now();
        for _ in 0..10 {
            assert_eq!(admit_at("2001:db8:1:2::1", now), Ok(()));
        }
        let wait = admit_at("2001:db8:1:2::ffff", now).unwrap_err();
        assert!((1..=6).contains(&wait), "{wait}");
        assert_eq!(admit_at("2001:db8:1:3::1", now), Ok(()), "another /64");
        let later = now + std::time::Duration::from_secs(7);
        assert_eq!(admit_at("2001:db8:1:2::1", later), Ok(()));
    }

    #[test]
    fn an_ipv4_address_is_its_own_key_and_a_mapped_one_is_the_same() {
        assert_eq!(key_of("::ffff:192.0.2.7"), key_of("192.0.2.7"));
        assert_ne!(key_of("192.0.2.7"), key_of("192.0.2.8"));
    }
}
