//! Failpoints: the places between commits where the scenario harness kills a worker
//! (docs/DESIGN.md §13). Compiled in only with the `failpoints` feature; without it
//! [`hit`] is an empty inline function. Even when compiled in, a failpoint is armed only by the
//! process's environment at start (`Z29C_FAILPOINT=<name>`), never by anything a request sends.

/// Whether this build has failpoints at all.
pub const COMPILED_IN: bool = cfg!(feature = "failpoints");

/// A place between two commits where the harness may kill the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// A batch's claim committed (its leases, its request identities, and checkpoint 3 for the
    /// steps whose contract allows it there); none of its calls has been made.
    AfterBatchClaim,
    /// The request identity is durable; the call has not been made.
    AfterObligationCommit,
    /// The destination answered; nothing about the answer is durable yet.
    AfterResponseBeforeObservation,
    /// The receipt is durable; the worker has not moved on.
    AfterReceiptBeforeAck,
    /// A status lookup answered; its observation is not durable yet.
    DuringStatusQuery,
    /// A withdrawal was accepted; its observation is not durable yet.
    DuringCompensationAcceptance,
    /// Consumers took a batch of events; the publisher's cursor has not moved past it.
    DuringOutboxPublication,
    /// The archiver's batch is durable in the archive; its tombstones and removals are not
    /// committed yet.
    AfterArchiveWrite,
}

/// Every failpoint, in protocol order.
pub const POINTS: [FaultPoint; 8] = [
    FaultPoint::AfterBatchClaim,
    FaultPoint::AfterObligationCommit,
    FaultPoint::AfterResponseBeforeObservation,
    FaultPoint::AfterReceiptBeforeAck,
    FaultPoint::DuringStatusQuery,
    FaultPoint::DuringCompensationAcceptance,
    FaultPoint::DuringOutboxPublication,
    FaultPoint::AfterArchiveWrite,
];

impl FaultPoint {
    /// The name `Z29C_FAILPOINT` arms it by.
    pub fn name(self) -> &'static str {
        match self {
            FaultPoint::AfterBatchClaim => "after_batch_claim",
            FaultPoint::AfterObligationCommit => "after_obligation_commit",
            FaultPoint::AfterResponseBeforeObservation => "after_response_before_observation",
            FaultPoint::AfterReceiptBeforeAck => "after_receipt_before_ack",
            FaultPoint::DuringStatusQuery => "during_status_query",
            FaultPoint::DuringCompensationAcceptance => "during_compensation_acceptance",
            FaultPoint::DuringOutboxPublication => "during_outbox_publication",
            FaultPoint::AfterArchiveWrite => "after_archive_write",
        }
    }
}

/// A deliberately broken recovery rule, for proving the harness catches one: with the
/// `failpoints` feature and `Z29C_BREAK_RULE=<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BrokenRule {
    /// Recovery resends under an opaque adapter as if it were idempotent.
    ResendOpaque,
    /// Recovery regenerates a request under the newest definition version instead of the
    /// workflow's own.
    RegenerateWithNewest,
    /// `check --before-resume` recovers only the steps caught mid-call, and sends the ones the
    /// backup saw ready or waiting as if nothing could have happened since.
    ResumeBlind,
}

impl BrokenRule {
    /// Every rule the harness can break.
    pub const ALL: [BrokenRule; 3] = [
        BrokenRule::ResendOpaque,
        BrokenRule::RegenerateWithNewest,
        BrokenRule::ResumeBlind,
    ];

    /// The name `Z29C_BREAK_RULE` breaks it by.
    pub fn name(self) -> &'static str {
        match self {
            BrokenRule::ResendOpaque => "resend_opaque",
            BrokenRule::RegenerateWithNewest => "regenerate_with_newest",
            BrokenRule::ResumeBlind => "resume_blind",
        }
    }
}

/// Kills this process with SIGKILL when `point` is the armed failpoint.
#[inline(always)]
pub fn hit(point: FaultPoint) {
    #[cfg(feature = "failpoints")]
    {
        static ARMED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let name = point.name();
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
    let _ = point;
}

/// Whether `rule` is the one this process was started to break.
#[inline(always)]
pub fn broken(rule: BrokenRule) -> bool {
    #[cfg(feature = "failpoints")]
    {
        static BROKEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        BROKEN
            .get_or_init(|| std::env::var("Z29C_BREAK_RULE").ok())
            .as_deref()
            == Some(rule.name())
    }
    #[cfg(not(feature = "failpoints"))]
    {
        let _ = rule;
        false
    }
}
