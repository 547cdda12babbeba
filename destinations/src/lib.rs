//! Synthetic external destinations for Z29C.
//!
//! Mocks that either succeed or fail before doing anything encode the very assumption under
//! test. These destinations are real HTTP services with their own PostgreSQL tables (schema
//! `destination`): they **commit** an effect and can then lose, delay or spoil the answer, as
//! told by a fault script. Z29C reaches them only over HTTP; the contract it codes against is
//! `PROTOCOL.md`.
//!
//! Three [`Kind`]s differ in what they offer after a lost answer: the idempotent kind
//! deduplicates by `Idempotency-Key`, the queryable kind answers lookups by client reference
//! (after a visibility window), the opaque kind offers neither. All three offer withdrawal.
//!
//! Two more destinations speak APIs shaped like real public ones (`PAYMENTS.md`), chosen by
//! [`Config::api`]: a payments API in the style of Stripe's ([`Config::payments`]) and a partner
//! webhook receiver checking an HMAC signature ([`Config::webhook`]). They obey the same fault
//! scripts and show their effects in the same `/ledger`.
//!
//! ```no_run
//! # async fn example(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
//! use destinations::{Config, Fault, FaultPlan, FaultRule, Kind, Match, Operation};
//!
//! let destination = destinations::spawn(pool, Config::new(Kind::Opaque)).await?;
//! destination.set_faults(FaultPlan::rules([FaultRule::new(
//!     Operation::Deliver,
//!     Match::Any,
//!     Fault::DropResponse {},
//! )
//! .times(1)]))?;
//! // … drive Z29C against destination.base_url(), then count the real effects:
//! assert_eq!(destination.ledger().await?.deliveries.len(), 1);
//! # Ok(())
//! # }
//! ```

mod beside;
mod config;
mod delivery;
mod disrupt;
mod error;
mod faults;
mod http;
mod kind;
mod ledger;
pub mod payments;
pub mod protocol;
mod random;
mod script;
mod serve;
mod state;
mod store;
pub mod webhook;

pub use beside::database_beside;
pub use config::{
    Api, Clock, Config, ControlToken, DEFAULT_IDEMPOTENCY_RETENTION, DEFAULT_VISIBILITY_WINDOW,
    ManualClock, Secret,
};
pub use faults::{
    FIRED_LOG_LIMIT, Fault, FaultKind, FaultPlan, FaultPlanError, FaultReport, FaultRule,
    FaultSource, FiredFault, Match, Operation, RandomFaults, RuleReport,
};
pub use kind::{Kind, Service, UnknownKind, UnknownService};
pub use ledger::{
    Effect, Ledger, LedgerCharge, LedgerDecline, LedgerDelivery, LedgerEvent, LedgerRefund,
    LedgerWithdrawal,
};
pub use serve::{RunningDestination, router, serve, spawn};

/// The destinations' migrations (schema `destination`), for `#[sqlx::test(migrator = …)]`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Applies the destinations' migrations to a database that may also hold another system's
/// (Z29C's, during development): migrations it does not know are left alone.
pub async fn migrate(pool: &sqlx::PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.set_ignore_missing(true);
    migrator.run(pool).await
}
