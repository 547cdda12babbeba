//! Every SQL statement the destinations' requests run, as small named functions over a pool
//! (the ledger's reads are in `ledger`).
//!
//! Each statement is its own transaction: the effect is committed before any answer leaves,
//! and deduplication rests on unique constraints, never on a read followed by a write.
//!
//! Optional `now` parameters are bound `as _`: the workspace also enables sqlx's `time` feature
//! (through tower-sessions' store), which makes `time::OffsetDateTime` the type the macros
//! expect for a `timestamptz` parameter; chrono's `DateTime<Utc>` encodes the same value.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// A delivery to record.
pub(crate) struct NewDelivery<'a> {
    pub destination: &'a str,
    pub client_reference: &'a str,
    /// Only for the idempotent kind; `None` never conflicts.
    pub idempotency_key: Option<&'a str>,
    pub digest: &'a str,
    pub recipient: &'a str,
    pub summary: &'a str,
    /// `None` for the database's `now()`.
    pub now: Option<DateTime<Utc>>,
}

/// A recorded delivery, as its creator sees it.
#[derive(Debug)]
pub(crate) struct Delivery {
    pub external_reference: String,
    pub client_reference: String,
    pub digest: String,
    pub accepted_at: DateTime<Utc>,
}

/// A recorded withdrawal, as its requester sees it.
#[derive(Debug)]
pub(crate) struct Withdrawal {
    pub withdrawal_reference: String,
    pub external_reference: String,
    pub withdrawn_at: DateTime<Utc>,
}

/// Records a delivery, or returns `None` if its idempotency key is already taken (after
/// waiting for a concurrent insert of the same key to commit or roll back).
pub(crate) async fn insert_delivery(
    pool: &PgPool,
    new: NewDelivery<'_>,
) -> sqlx::Result<Option<Delivery>> {
    sqlx::query_as!(
        Delivery,
        r#"insert into destination.delivery
               (destination, client_reference, idempotency_key, digest, recipient, summary,
                accepted_at)
           values ($1, $2, $3, $4, $5, $6, coalesce($7, now()))
           on conflict (destination, idempotency_key) do nothing
           returning external_reference, client_reference, digest,
                     accepted_at as "accepted_at: DateTime<Utc>""#,
        new.destination,
        new.client_reference,
        new.idempotency_key,
        new.digest,
        new.recipient,
        new.summary,
        new.now as _,
    )
    .fetch_optional(pool)
    .await
}

/// The delivery first recorded under an idempotency key.
pub(crate) async fn delivery_by_key(
    pool: &PgPool,
    destination: &str,
    idempotency_key: &str,
) -> sqlx::Result<Option<Delivery>> {
    sqlx::query_as!(
        Delivery,
        r#"select external_reference, client_reference, digest,
                  accepted_at as "accepted_at: DateTime<Utc>"
           from destination.delivery
           where destination = $1 and idempotency_key = $2"#,
        destination,
        idempotency_key,
    )
    .fetch_optional(pool)
    .await
}

/// The deliveries with a client reference that the status index shows at `now`: those
/// accepted at least `window_ms` before it. Earliest first.
pub(crate) async fn visible_deliveries(
    pool: &PgPool,
    destination: &str,
    client_reference: &str,
    window_ms: i64,
    now: Option<DateTime<Utc>>,
) -> sqlx::Result<Vec<Delivery>> {
    sqlx::query_as!(
        Delivery,
        r#"select external_reference, client_reference, digest,
                  accepted_at as "accepted_at: DateTime<Utc>"
           from destination.delivery
           where destination = $1 and client_reference = $2
             and accepted_at + $3::bigint * interval '1 millisecond' <= coalesce($4, now())
           order by number"#,
        destination,
        client_reference,
        window_ms,
        now as _,
    )
    .fetch_all(pool)
    .await
}

/// Records the withdrawal of a delivery, or returns `None` when the delivery is unknown, is
/// already withdrawn, or the key is already taken.
pub(crate) async fn insert_withdrawal(
    pool: &PgPool,
    destination: &str,
    external_reference: &str,
    idempotency_key: &str,
    now: Option<DateTime<Utc>>,
) -> sqlx::Result<Option<Withdrawal>> {
    sqlx::query_as!(
        Withdrawal,
        r#"with inserted as (
               insert into destination.withdrawal
                   (destination, delivery_number, idempotency_key, withdrawn_at)
               select destination, number, $3, coalesce($4, now())
               from destination.delivery
               where destination = $1 and external_reference = $2
               on conflict do nothing
               returning withdrawal_reference, withdrawn_at
           )
           select withdrawal_reference as "withdrawal_reference!",
                  $2 as "external_reference!",
                  withdrawn_at as "withdrawn_at!: DateTime<Utc>"
           from inserted"#,
        destination,
        external_reference,
        idempotency_key,
        now as _,
    )
    .fetch_optional(pool)
    .await
}

/// The withdrawal recorded under an idempotency key, whichever delivery it withdrew.
pub(crate) async fn withdrawal_by_key(
    pool: &PgPool,
    destination: &str,
    idempotency_key: &str,
) -> sqlx::Result<Option<Withdrawal>> {
    sqlx::query_as!(
        Withdrawal,
        r#"select w.withdrawal_reference, d.external_reference,
                  w.withdrawn_at as "withdrawn_at: DateTime<Utc>"
           from destination.withdrawal w
           join destination.delivery d on d.number = w.delivery_number
           where w.destination = $1 and w.idempotency_key = $2"#,
        destination,
        idempotency_key,
    )
    .fetch_optional(pool)
    .await
}

/// The withdrawal of a delivery, whatever key recorded it.
pub(crate) async fn withdrawal_of(
    pool: &PgPool,
    destination: &str,
    external_reference: &str,
) -> sqlx::Result<Option<Withdrawal>> {
    sqlx::query_as!(
        Withdrawal,
        r#"select w.withdrawal_reference, d.external_reference,
                  w.withdrawn_at as "withdrawn_at: DateTime<Utc>"
           from destination.withdrawal w
           join destination.delivery d on d.number = w.delivery_number
           where d.destination = $1 and d.external_reference = $2"#,
        destination,
        external_reference,
    )
    .fetch_optional(pool)
    .await
}
