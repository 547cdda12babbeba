//! Every SQL statement of the payments API, as small named functions over a connection, so
//! a keyed request runs them all in the one transaction that holds its key's lock.
//!
//! Optional `now` parameters are bound `as _` (see `crate::store`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use sqlx::types::Json;

use super::wire::Charge;

/// A charge as stored: `succeeded`, or `failed` (a decline, kept as Stripe keeps it).
pub(crate) struct ChargeRow {
    pub id: String,
    pub amount: i64,
    pub currency: String,
    pub description: Option<String>,
    pub customer: Option<String>,
    pub metadata: Json<BTreeMap<String, String>>,
    pub created_at: DateTime<Utc>,
    pub refunded: bool,
    pub status: String,
    pub failure_code: Option<String>,
}

impl From<ChargeRow> for Charge {
    fn from(row: ChargeRow) -> Self {
        Charge {
            id: row.id,
            object: "charge".to_owned(),
            amount: row.amount,
            currency: row.currency,
            status: row.status,
            failure_code: row.failure_code,
            description: row.description,
            customer: row.customer,
            metadata: row.metadata.0,
            created: row.created_at.timestamp(),
            refunded: row.refunded,
        }
    }
}

/// A charge or a declined attempt to record.
pub(crate) struct NewCharge<'a> {
    pub destination: &'a str,
    pub amount: i64,
    pub currency: &'a str,
    pub description: Option<&'a str>,
    pub customer: Option<&'a str>,
    pub metadata: &'a BTreeMap<String, String>,
    pub idempotency_key: Option<&'a str>,
    pub now: Option<DateTime<Utc>>,
}

/// An answer saved under an idempotency key.
pub(crate) struct SavedAnswer {
    pub fingerprint: String,
    pub status: i16,
    pub body: String,
}

/// Waits until no other transaction holds `key` of `destination`, and holds it until this
/// transaction ends. Keys whose hashes collide only wait for each other.
pub(crate) async fn lock_key(
    conn: &mut PgConnection,
    destination: &str,
    key: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "select pg_advisory_xact_lock(hashtextextended($1 || chr(10) || $2, 0))",
        destination,
        key,
    )
    .fetch_one(conn)
    .await
    .map(drop)
}

/// The answer first given under `key`, unless `retention_ms` have passed since.
pub(crate) async fn saved_answer(
    conn: &mut PgConnection,
    destination: &str,
    key: &str,
    retention_ms: i64,
    now: Option<DateTime<Utc>>,
) -> sqlx::Result<Option<SavedAnswer>> {
    sqlx::query_as!(
        SavedAnswer,
        r#"select fingerprint, status, body
           from destination.payment_idempotency
           where destination = $1 and idempotency_key = $2
             and created_at + $3::bigint * interval '1 millisecond' > coalesce($4, now())"#,
        destination,
        key,
        retention_ms,
        now as _,
    )
    .fetch_optional(conn)
    .await
}

/// Saves the first answer under `key`, replacing one past its retention.
pub(crate) async fn save_answer(
    conn: &mut PgConnection,
    destination: &str,
    key: &str,
    answer: &SavedAnswer,
    now: Option<DateTime<Utc>>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into destination.payment_idempotency
               (destination, idempotency_key, fingerprint, status, body, created_at)
           values ($1, $2, $3, $4, $5, coalesce($6, now()))
           on conflict (destination, idempotency_key) do update
           set fingerprint = excluded.fingerprint, status = excluded.status,
               body = excluded.body, created_at = excluded.created_at"#,
        destination,
        key,
        answer.fingerprint,
        answer.status,
        answer.body,
        now as _,
    )
    .execute(conn)
    .await
    .map(drop)
}

/// Records a charge under the id `id`.
pub(crate) async fn insert_charge(
    conn: &mut PgConnection,
    id: &str,
    new: &NewCharge<'_>,
) -> sqlx::Result<ChargeRow> {
    sqlx::query_as!(
        ChargeRow,
        r#"insert into destination.charge
               (destination, id, amount, currency, description, customer, metadata,
                idempotency_key, created_at)
           values ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, now()))
           returning id, amount, currency, description, customer,
                     metadata as "metadata: Json<BTreeMap<String, String>>",
                     created_at as "created_at: DateTime<Utc>", false as "refunded!",
                     status, failure_code"#,
        new.destination,
        id,
        new.amount,
        new.currency,
        new.description,
        new.customer,
        Json(new.metadata) as _,
        new.idempotency_key,
        new.now as _,
    )
    .fetch_one(conn)
    .await
}

/// Records a declined attempt as a `failed` charge under the id `id`, as Stripe keeps one.
pub(crate) async fn insert_failed_charge(
    conn: &mut PgConnection,
    id: &str,
    new: &NewCharge<'_>,
    decline_code: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into destination.charge
               (destination, id, amount, currency, description, customer, metadata,
                idempotency_key, created_at, status, failure_code)
           values ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, now()), 'failed', $10)"#,
        new.destination,
        id,
        new.amount,
        new.currency,
        new.description,
        new.customer,
        Json(new.metadata) as _,
        new.idempotency_key,
        new.now as _,
        decline_code,
    )
    .execute(conn)
    .await
    .map(drop)
}

/// A charge of `destination`, with no lag.
pub(crate) async fn charge(
    conn: &mut PgConnection,
    destination: &str,
    id: &str,
) -> sqlx::Result<Option<ChargeRow>> {
    sqlx::query_as!(
        ChargeRow,
        r#"select c.id, c.amount, c.currency, c.description, c.customer,
                  c.metadata as "metadata: Json<BTreeMap<String, String>>",
                  c.created_at as "created_at: DateTime<Utc>",
                  exists (select from destination.refund r where r.charge_number = c.number)
                      as "refunded!",
                  c.status, c.failure_code
           from destination.charge c
           where c.destination = $1 and c.id = $2"#,
        destination,
        id,
    )
    .fetch_optional(conn)
    .await
}

/// The charges whose `metadata[key]` is `value` that the search index shows at `now`: those
/// created at least `window_ms` before it. Newest first, at most `limit`.
pub(crate) async fn search(
    conn: &mut PgConnection,
    destination: &str,
    (key, value): (&str, &str),
    window_ms: i64,
    now: Option<DateTime<Utc>>,
    limit: i64,
) -> sqlx::Result<Vec<ChargeRow>> {
    sqlx::query_as!(
        ChargeRow,
        r#"select c.id, c.amount, c.currency, c.description, c.customer,
                  c.metadata as "metadata: Json<BTreeMap<String, String>>",
                  c.created_at as "created_at: DateTime<Utc>",
                  exists (select from destination.refund r where r.charge_number = c.number)
                      as "refunded!",
                  c.status, c.failure_code
           from destination.charge c
           where c.destination = $1 and c.metadata @> jsonb_build_object($2::text, $3::text)
             and c.created_at + $4::bigint * interval '1 millisecond' <= coalesce($5, now())
           order by c.number desc
           limit $6"#,
        destination,
        key,
        value,
        window_ms,
        now as _,
        limit,
    )
    .fetch_all(conn)
    .await
}

/// A refund as answered.
pub(crate) struct RefundRow {
    pub id: String,
    pub charge: String,
    pub amount: i64,
    pub reason: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// Refunds the whole of a charge, or returns `None` when the charge is unknown or already
/// refunded (after waiting for a concurrent refund of it to commit or roll back).
pub(crate) async fn insert_refund(
    conn: &mut PgConnection,
    destination: &str,
    (id, charge): (&str, &str),
    reason: Option<&str>,
    idempotency_key: Option<&str>,
    now: Option<DateTime<Utc>>,
) -> sqlx::Result<Option<RefundRow>> {
    sqlx::query_as!(
        RefundRow,
        r#"with inserted as (
               insert into destination.refund
                   (destination, id, charge_number, amount, reason, idempotency_key, created_at)
               select destination, $2, number, amount, $4, $5, coalesce($6, now())
               from destination.charge
               where destination = $1 and id = $3 and status = 'succeeded'
               on conflict (charge_number) do nothing
               returning id, amount, reason, created_at
           )
           select id as "id!", $3 as "charge!", amount as "amount!", reason,
                  created_at as "created_at!: DateTime<Utc>"
           from inserted"#,
        destination,
        id,
        charge,
        reason,
        idempotency_key,
        now as _,
    )
    .fetch_optional(conn)
    .await
}

/// A page of the charges of `destination` (of `customer`, when given), after the charge
/// `starting_after` in the list's order: newest first, or oldest first when `oldest_first`.
/// At most `limit` charges, and one more when there are more (the caller cuts it).
pub(crate) async fn list(
    conn: &mut PgConnection,
    destination: &str,
    customer: Option<&str>,
    starting_after: Option<&str>,
    oldest_first: bool,
    limit: i64,
) -> sqlx::Result<Vec<ChargeRow>> {
    sqlx::query_as!(
        ChargeRow,
        r#"select c.id, c.amount, c.currency, c.description, c.customer,
                  c.metadata as "metadata: Json<BTreeMap<String, String>>",
                  c.created_at as "created_at: DateTime<Utc>",
                  exists (select from destination.refund r where r.charge_number = c.number)
                      as "refunded!",
                  c.status, c.failure_code
           from destination.charge c
           where c.destination = $1 and ($2::text is null or c.customer = $2)
             and ($3::text is null or (case when $4
                    then c.number > (select a.number from destination.charge a where a.destination = $1 and a.id = $3)
                    else c.number < (select a.number from destination.charge a where a.destination = $1 and a.id = $3) end))
           order by case when $4 then c.number end asc, case when not $4 then c.number end desc
           limit $5"#,
        destination,
        customer,
        starting_after,
        oldest_first,
        limit,
    )
    .fetch_all(conn)
    .await
}
