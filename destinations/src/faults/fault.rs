//! What can go wrong with a request: the operations a fault is aimed at, the faults, and
//! their kinds.

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
                K::Refuse
                    | K::Reject
                    | K::DelayResponse
                    | K::DropResponse
                    | K::LoseRequest
                    | K::ErrorAfterAccept
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
    /// Close the connection without doing the work or sending a byte: a request lost on its
    /// way, which the client cannot tell from [`Fault::DropResponse`].
    LoseRequest {},
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
            Fault::LoseRequest {} => FaultKind::LoseRequest,
            Fault::ErrorAfterAccept { .. } => FaultKind::ErrorAfterAccept,
            Fault::LookupUnavailable {} => FaultKind::LookupUnavailable,
            Fault::LookupProcessing {} => FaultKind::LookupProcessing,
            Fault::WithdrawalTimeout { .. } => FaultKind::WithdrawalTimeout,
            Fault::WithdrawalDrop {} => FaultKind::WithdrawalDrop,
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
    /// [`Fault::LoseRequest`].
    LoseRequest,
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
            FaultKind::LoseRequest => "lose_request",
            FaultKind::ErrorAfterAccept => "error_after_accept",
            FaultKind::LookupUnavailable => "lookup_unavailable",
            FaultKind::LookupProcessing => "lookup_processing",
            FaultKind::WithdrawalTimeout => "withdrawal_timeout",
            FaultKind::WithdrawalDrop => "withdrawal_drop",
        }
    }

    pub(super) fn needs_delay(self) -> bool {
        matches!(
            self,
            FaultKind::DelayResponse | FaultKind::WithdrawalTimeout
        )
    }

    /// The fault a random plan injects for this kind.
    pub(super) fn instantiate(self, delay_ms: Option<u64>) -> Fault {
        let ms = delay_ms.unwrap_or_default();
        match self {
            FaultKind::Refuse => Fault::Refuse {},
            FaultKind::Reject => Fault::Reject {
                code: "random_rejection".into(),
                retryable: true,
            },
            FaultKind::DelayResponse => Fault::DelayResponse { ms },
            FaultKind::DropResponse => Fault::DropResponse {},
            FaultKind::LoseRequest => Fault::LoseRequest {},
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
