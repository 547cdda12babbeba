//! The pure heart of Z29C: identities, states and outcomes, and the decisions taken from them.
//!
//! Nothing here performs I/O, so the same code runs in workers, in server functions and in the
//! browser. With the `runtime` feature the enums also map to their PostgreSQL enum types.

pub mod actions;
mod audit;
mod authority;
mod bulk;
pub mod contract;
pub mod event;
pub mod identity;
pub mod incident;
pub mod limits;
pub mod lookup;
pub mod names;
pub mod outcome;
pub mod receipt;
pub mod recovery;
pub mod retention;
mod state;
mod step_kind;
pub mod trust;
pub mod words;

pub use actions::{OperatorAction, Role, StepFacts, permitted_actions, refusal};
pub use audit::AuditAction;
pub use authority::{Authority, Suspension, SuspensionScope};
pub use bulk::BulkOutcome;
pub use contract::{
    Compensation, ContractKind, REPLAY_MARGIN_MS, SideEffectContract, UnknownOutcomePolicy,
};
pub use event::EventKind;
pub use identity::{InputDigest, RequestKey, StepKey};
pub use incident::{Disposition, IncidentKind};
pub use limits::Limits;
pub use lookup::LookupObservation;
pub use outcome::{AttemptOutcome, ObservationKind, TransportObservation};
pub use receipt::{AcceptedReceipt, ReceiptMethod};
pub use recovery::{
    LookupAnswer, RecoveryDecision, ReviewReason, UnknownOutcomeFacts, decide_after_unknown,
};
pub use state::{StepState, WorkflowState};
pub use step_kind::StepKind;
pub use trust::{Claim, Operation, Trust, trusted_contract};
