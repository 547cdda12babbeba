//! Sign-in throttling (docs/DESIGN.md §15): an in-memory limiter per address before anything
//! is written, then failures counted in the database per name and per address, so several
//! server processes agree. Failures are kept per name and window, never one row each.

use sqlx::PgPool;

use super::{Operator, authenticate};
use crate::domain::AuditAction;
use crate::store::journal::{self, Actor};

/// How long the per-name, per-window failure counts are kept.
pub const FAILURES_KEPT_DAYS: i64 = 90;

/// The longest name kept from a sign-in attempt (throttled, recorded and audited as typed).
pub const TYPED_NAME_LIMIT: usize = 64;
/// Failures count towards throttling for this long.
pub const FAILURE_WINDOW_SECONDS: i64 = 15 * 60;
/// Failures for one name within the window before attempts must wait.
pub const FREE_FAILURES_PER_NAME: i64 = 5;
/// Failures from one address within the window before attempts must wait.
pub const FREE_FAILURES_PER_ADDRESS: i64 = 20;
/// The longest wait.
pub const LONGEST_WAIT_SECONDS: i64 = 15 * 60;
/// The address recorded when the server was not told the client's.
pub const UNKNOWN_ADDRESS: &str = "unknown";

/// Forgets the attempts throttling can no longer count (older than four windows), and the
/// failure counts older than [`FAILURES_KEPT_DAYS`]; how many rows were deleted. `serve` runs
/// it every ten minutes.
pub async fn forget_old_attempts(pool: &PgPool) -> sqlx::Result<u64> {
    let attempts =
        crate::store::sign_in::forget_older_than(pool, 4 * FAILURE_WINDOW_SECONDS).await?;
    let failures =
        crate::store::sign_in::forget_failures_older_than(pool, FAILURES_KEPT_DAYS).await?;
    Ok(attempts + failures)
}

/// How long an attempt must wait after `failures` failures within the window, `free` of which
/// are allowed without waiting: `2^(failures - free)` seconds, at most [`LONGEST_WAIT_SECONDS`].
pub fn wait_seconds(failures: i64, free: i64) -> i64 {
    match failures - free {
        n if n < 0 => 0,
        n if n >= 10 => LONGEST_WAIT_SECONDS,
        n => (1_i64 << n).min(LONGEST_WAIT_SECONDS),
    }
}

/// Whose failures made an attempt wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottledBy {
    Account,
    Address,
}

/// How a sign-in attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignIn {
    SignedIn(Operator),
    /// Unknown name, disabled account or wrong password: one sentence for all three.
    Refused,
    /// Refused before any password was checked; the attempt may come back in `seconds`.
    Throttled {
        by: ThrottledBy,
        seconds: i64,
    },
}

impl SignIn {
    /// Whether `text` is a sentence [`SignIn::refusal`] writes: what the sign-in page may show
    /// when its address carries a refusal, since anyone can write a link with any text in it.
    pub fn is_own_refusal(text: &str) -> bool {
        SignIn::Refused.refusal().as_deref() == Some(text)
            || [ThrottledBy::Account, ThrottledBy::Address]
                .into_iter()
                .any(|by| {
                    (1..=LONGEST_WAIT_SECONDS).any(|seconds| {
                        SignIn::Throttled { by, seconds }.refusal().as_deref() == Some(text)
                    })
                })
    }

    /// The sentence a person reads when the attempt was refused.
    pub fn refusal(&self) -> Option<String> {
        match self {
            SignIn::SignedIn(_) => None,
            SignIn::Refused => Some("Unknown username or wrong password.".into()),
            SignIn::Throttled { by, seconds } => {
                let whose = match by {
                    ThrottledBy::Account => "for this account",
                    ThrottledBy::Address => "from this address",
                };
                let when = match *seconds {
                    1 => "1 second".to_owned(),
                    s if s < 120 => format!("{s} seconds"),
                    s => format!("{} minutes", (s + 59) / 60),
                };
                Some(format!(
                    "Too many failed sign-ins {whose}; try again in {when}."
                ))
            }
        }
    }
}

/// Signs in `typed` (trimmed, cut to [`TYPED_NAME_LIMIT`] characters) from `address`, throttled.
///
/// First, in this process's memory, each address (an IPv6 one by its /64) may try about ten
/// times a minute, and all of them together a few dozen times a second: an attempt over either
/// is refused before anything is written or any password checked. Then the rule: failures count
/// for 15 minutes. After 5 failures within them for a name (or 20 from an address), each further
/// attempt must wait `2^(n - 5)` seconds (`2^(n - 20)` for an address) since the last of those
/// `n` failures, at most 15 minutes. An attempt inside the wait is refused without running
/// Argon2, and counts as a failure itself, so hammering lengthens the wait. Every attempt the
/// limiter admits is recorded, as a failure until its password matches, in the database, so
/// several server processes agree; a success is recorded and clears nothing. An address counts
/// only when it is known: when the server was not told it ([`UNKNOWN_ADDRESS`]) only the name's
/// rule applies, so that no one can lock everyone out. Failures are counted per name and
/// 15-minute window (`sign_in_failure`, kept [`FAILURES_KEPT_DAYS`] days, `z29c user
/// failures`); successes are audited as `sign_in`.
pub async fn sign_in(
    pool: &PgPool,
    typed: &str,
    password: &str,
    address: &str,
) -> sqlx::Result<SignIn> {
    let typed: String = typed.trim().chars().take(TYPED_NAME_LIMIT).collect();
    let address: String = address.chars().take(TYPED_NAME_LIMIT).collect();
    if let Err(seconds) = super::limiter::admit(&address) {
        return Ok(SignIn::Throttled {
            by: ThrottledBy::Address,
            seconds,
        });
    }
    let known_address = (address != UNKNOWN_ADDRESS).then_some(address.as_str());
    let recent = crate::store::sign_in::record(
        pool,
        &typed,
        &address,
        known_address,
        FAILURE_WINDOW_SECONDS,
    )
    .await?;
    let left = |failures, free, last: Option<chrono::DateTime<chrono::Utc>>| {
        let Some(last) = last else { return 0 };
        let until = last + chrono::Duration::seconds(wait_seconds(failures, free));
        let millis = (until - recent.now).num_milliseconds();
        if millis > 0 { (millis + 999) / 1000 } else { 0 }
    };
    let by_name = left(
        recent.name_failures,
        FREE_FAILURES_PER_NAME,
        recent.name_last,
    );
    let by_address = left(
        recent.address_failures,
        FREE_FAILURES_PER_ADDRESS,
        recent.address_last,
    );
    let outcome = if by_name > 0 || by_address > 0 {
        SignIn::Throttled {
            by: if by_name >= by_address {
                ThrottledBy::Account
            } else {
                ThrottledBy::Address
            },
            seconds: by_name.max(by_address),
        }
    } else {
        match authenticate(pool, &typed, password).await? {
            Some(operator) => {
                crate::store::sign_in::succeeded(pool, recent.id).await?;
                SignIn::SignedIn(operator)
            }
            None => SignIn::Refused,
        }
    };
    record(pool, &outcome, &typed, &address).await?;
    Ok(outcome)
}

/// Audits a success; counts a failure for its name and window.
async fn record(pool: &PgPool, outcome: &SignIn, typed: &str, address: &str) -> sqlx::Result<()> {
    match outcome {
        SignIn::SignedIn(operator) => {
            let details = serde_json::json!({ "role": operator.role, "address": address });
            let mut conn = pool.acquire().await?;
            journal::audit_unattached(
                &mut conn,
                Actor::Operator(&operator.username),
                AuditAction::SignIn,
                None,
                details,
            )
            .await?;
        }
        SignIn::Refused | SignIn::Throttled { .. } => {
            let throttled = matches!(outcome, SignIn::Throttled { .. });
            crate::store::sign_in::count_failure(
                pool,
                typed,
                address,
                throttled,
                FAILURE_WINDOW_SECONDS,
            )
            .await?;
        }
    }
    Ok(())
}
