//! Failpoints: the places between commits where the scenario harness kills a worker
//! (DESIGN.md § Fault points). Compiled in only with the `failpoints` feature; without it
//! [`hit`] is an empty inline function. Even when compiled in, a failpoint is armed only by the
//! process's environment at start (`Z29C_FAILPOINT=<name>`), never by anything a request sends.

/// Whether this build has failpoints at all.
pub const COMPILED_IN: bool = cfg!(feature = "failpoints");

/// Every failpoint, in protocol order.
pub const POINTS: [&str; 6] = [
    // The request identity is durable; the call has not been made.
    "after_obligation_commit",
    // The destination answered; nothing about the answer is durable yet.
    "after_response_before_observation",
    // The receipt is durable; the worker has not moved on.
    "after_receipt_before_ack",
    // A status lookup answered; its observation is not durable yet.
    "during_status_query",
    // A withdrawal was accepted; its observation is not durable yet.
    "during_compensation_acceptance",
    // Consumers took a batch of events; the batch is not marked published.
    "during_outbox_publication",
];

/// Kills this process with SIGKILL when `name` is the armed failpoint.
#[inline(always)]
pub fn hit(name: &'static str) {
    #[cfg(feature = "failpoints")]
    {
        static ARMED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        if ARMED
            .get_or_init(|| std::env::var("Z29C_FAILPOINT").ok())
            .as_deref()
            == Some(name)
        {
            eprintln!("failpoint {name}: killing this process");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

/// A deliberately broken recovery rule, for proving the harness catches one: with the
/// `failpoints` feature and `Z29C_BREAK_RULE=<rule>`. The rules:
///
/// - `resend_opaque`: recovery resends under an opaque adapter as if it were idempotent;
/// - `regenerate_with_newest`: recovery regenerates a request under the newest definition
///   version instead of the workflow's own;
/// - `resume_blind`: `check --before-resume` recovers only the steps caught mid-call, and
///   sends the ones the backup saw ready or waiting as if nothing could have happened since.
#[inline(always)]
pub fn broken(rule: &'static str) -> bool {
    #[cfg(feature = "failpoints")]
    {
        static BROKEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        BROKEN
            .get_or_init(|| std::env::var("Z29C_BREAK_RULE").ok())
            .as_deref()
            == Some(rule)
    }
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = rule;
        false
    }
}
