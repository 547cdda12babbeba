//! The destination's own truth: every effect it committed, read straight from its database.

mod apis;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

pub use apis::{LedgerCharge, LedgerDecline, LedgerEvent, LedgerRefund};

/// Every effect one destination committed, in the order it committed them (`GET /ledger`):
/// deliveries and withdrawals (destination protocol), charges, declined attempts and refunds
/// (payments), received events (webhook). Tests count real effects here, not in what the
/// client was told. The lists of the other APIs are left out of the JSON when empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// Accepted deliveries, earliest first.
    pub deliveries: Vec<LedgerDelivery>,
    /// Recorded withdrawals, earliest first.
    pub withdrawals: Vec<LedgerWithdrawal>,
    /// Charges made, earliest first: the payments API's effects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub charges: Vec<LedgerCharge>,
    /// Declined charge attempts, earliest first: recorded, but no money moved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declines: Vec<LedgerDecline>,
    /// Refunds made, earliest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refunds: Vec<LedgerRefund>,
    /// Webhook events received with a valid signature, earliest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<LedgerEvent>,
}

impl Ledger {
    /// Reads the ledger of the destination named `destination` (its [`crate::Config::name`]).
    pub async fn read(pool: &PgPool, destination: &str) -> sqlx::Result<Self> {
        Ok(Ledger {
            deliveries: ledger_deliveries(pool, destination).await?,
            withdrawals: ledger_withdrawals(pool, destination).await?,
            charges: apis::charges(pool, destination).await?,
            declines: apis::declines(pool, destination).await?,
            refunds: apis::refunds(pool, destination).await?,
            events: apis::events(pool, destination).await?,
        })
    }

    /// The charges whose `metadata[subject]` is `subject`, earliest first.
    pub fn charges_for<'a>(&'a self, subject: &'a str) -> impl Iterator<Item = &'a LedgerCharge> {
        self.charges.iter().filter(move |charge| {
            charge.metadata.get("subject").map(String::as_str) == Some(subject)
        })
    }

    /// The charges made by requests carrying `Idempotency-Key: key`, earliest first.
    pub fn charges_with_key<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a LedgerCharge> {
        self.charges
            .iter()
            .filter(move |charge| charge.idempotency_key.as_deref() == Some(key))
    }

    /// The webhook events whose body's `subject` is `subject`, earliest first.
    pub fn events_for<'a>(&'a self, subject: &'a str) -> impl Iterator<Item = &'a LedgerEvent> {
        self.events
            .iter()
            .filter(move |event| event.subject.as_deref() == Some(subject))
    }

    /// The deliveries made for one client reference, earliest first.
    pub fn deliveries_for<'a>(
        &'a self,
        client_reference: &'a str,
    ) -> impl Iterator<Item = &'a LedgerDelivery> + 'a {
        self.deliveries
            .iter()
            .filter(move |delivery| delivery.client_reference == client_reference)
    }
}

/// Every delivery of a destination, in the order they were committed.
async fn ledger_deliveries(pool: &PgPool, destination: &str) -> sqlx::Result<Vec<LedgerDelivery>> {
    sqlx::query_as!(
        LedgerDelivery,
        r#"select d.external_reference, d.client_reference, d.idempotency_key, d.digest,
                  d.recipient, d.accepted_at as "accepted_at: DateTime<Utc>",
                  exists (select from destination.withdrawal w where w.delivery_number = d.number)
                      as "withdrawn!"
           from destination.delivery d
           where d.destination = $1
           order by d.number"#,
        destination,
    )
    .fetch_all(pool)
    .await
}

/// Every withdrawal of a destination, in the order they were committed.
async fn ledger_withdrawals(
    pool: &PgPool,
    destination: &str,
) -> sqlx::Result<Vec<LedgerWithdrawal>> {
    sqlx::query_as!(
        LedgerWithdrawal,
        r#"select w.withdrawal_reference, d.external_reference, w.idempotency_key,
                  w.withdrawn_at as "at: DateTime<Utc>"
           from destination.withdrawal w
           join destination.delivery d on d.number = w.delivery_number
           where w.destination = $1
           order by w.number"#,
        destination,
    )
    .fetch_all(pool)
    .await
}

/// One accepted delivery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerDelivery {
    /// The reference the destination issued, e.g. `x-82`.
    pub external_reference: String,
    /// The client's reference.
    pub client_reference: String,
    /// The key it was deduplicated by (idempotent kind only).
    pub idempotency_key: Option<String>,
    /// The digest it was created with.
    pub digest: String,
    /// Who it was for.
    pub recipient: String,
    /// When it was committed.
    pub accepted_at: DateTime<Utc>,
    /// Whether it has since been withdrawn.
    pub withdrawn: bool,
}

/// One recorded withdrawal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerWithdrawal {
    /// The reference the destination issued for the withdrawal, e.g. `w-5`.
    pub withdrawal_reference: String,
    /// The delivery withdrawn.
    pub external_reference: String,
    /// The key of the request that recorded it.
    pub idempotency_key: String,
    /// When it was committed.
    pub at: DateTime<Utc>,
}

/// A new effect, announced as soon as it is committed and before any answer is sent, so a
/// test or harness can act "after acceptance, before the response" without polling.
/// Replays announce nothing: they commit nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// A delivery was accepted.
    Delivered {
        /// The reference issued.
        external_reference: String,
        /// The client's reference.
        client_reference: String,
    },
    /// A delivery was withdrawn.
    Withdrawn {
        /// The withdrawal's own reference.
        withdrawal_reference: String,
        /// The delivery withdrawn.
        external_reference: String,
    },
    /// A charge was made (payments).
    Charged {
        /// The charge's id, `ch_…`.
        id: String,
        /// Its `metadata[subject]`, if any.
        subject: Option<String>,
        /// The request's `Idempotency-Key`, if any.
        idempotency_key: Option<String>,
    },
    /// A charge was refunded (payments).
    Refunded {
        /// The refund's id, `re_…`.
        id: String,
        /// The charge refunded.
        charge: String,
    },
    /// A webhook event was received (webhook).
    Received {
        /// The event's id, `evt_…`.
        id: String,
        /// The channel it was posted to.
        channel: String,
        /// The body's `subject` field, if any.
        subject: Option<String>,
    },
}
