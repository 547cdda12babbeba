//! The ledgers of the payments and webhook APIs: charges, declined attempts, refunds and
//! received events, read straight from their tables.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use sqlx::types::Json;

/// One charge made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerCharge {
    /// `ch_…`.
    pub id: String,
    /// In the currency's smallest unit.
    pub amount: i64,
    /// Three lowercase letters.
    pub currency: String,
    /// As given.
    pub description: Option<String>,
    /// As given.
    pub customer: Option<String>,
    /// The `metadata[KEY]` parameters.
    pub metadata: BTreeMap<String, String>,
    /// The request's `Idempotency-Key` as presented, whether or not it deduplicated.
    pub idempotency_key: Option<String>,
    /// When it was committed.
    pub created_at: DateTime<Utc>,
    /// Whether it has since been refunded.
    pub refunded: bool,
}

/// One declined charge attempt: answered 402, no money moved; kept as a failed charge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerDecline {
    /// The failed charge's id (`ch_…`).
    pub charge: String,
    /// As asked.
    pub amount: i64,
    /// As asked.
    pub currency: String,
    /// The customer whose card was declined.
    pub customer: Option<String>,
    /// The `metadata[KEY]` parameters.
    pub metadata: BTreeMap<String, String>,
    /// The request's `Idempotency-Key`, if any.
    pub idempotency_key: Option<String>,
    /// `generic_decline` or `insufficient_funds`.
    pub decline_code: String,
    /// When it was recorded.
    pub declined_at: DateTime<Utc>,
}

/// One refund made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRefund {
    /// `re_…`.
    pub id: String,
    /// The charge refunded.
    pub charge: String,
    /// The charge's whole amount.
    pub amount: i64,
    /// As given.
    pub reason: Option<String>,
    /// The request's `Idempotency-Key`, if any.
    pub idempotency_key: Option<String>,
    /// When it was committed.
    pub created_at: DateTime<Utc>,
}

/// One webhook event received.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEvent {
    /// `evt_…`.
    pub id: String,
    /// The channel of `POST /webhooks/{channel}`.
    pub channel: String,
    /// The body's `subject` field, when it is a string.
    pub subject: Option<String>,
    /// The body as received, parsed (the database keeps its exact text; this value does not
    /// keep the order of its keys).
    pub body: serde_json::Value,
    /// Always true: an event with a missing or wrong signature is refused and not recorded.
    pub signature_valid: bool,
    /// When it was committed.
    pub received_at: DateTime<Utc>,
}

pub(super) async fn charges(pool: &PgPool, destination: &str) -> sqlx::Result<Vec<LedgerCharge>> {
    let rows = sqlx::query!(
        r#"select c.id, c.amount, c.currency, c.description, c.customer,
                  c.metadata as "metadata: Json<BTreeMap<String, String>>",
                  c.idempotency_key, c.created_at as "created_at: DateTime<Utc>",
                  exists (select from destination.refund r where r.charge_number = c.number)
                      as "refunded!"
           from destination.charge c
           where c.destination = $1 and c.status = 'succeeded'
           order by c.number"#,
        destination,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| LedgerCharge {
            id: row.id,
            amount: row.amount,
            currency: row.currency,
            description: row.description,
            customer: row.customer,
            metadata: row.metadata.0,
            idempotency_key: row.idempotency_key,
            created_at: row.created_at,
            refunded: row.refunded,
        })
        .collect())
}

pub(super) async fn declines(pool: &PgPool, destination: &str) -> sqlx::Result<Vec<LedgerDecline>> {
    let rows = sqlx::query!(
        r#"select id, amount, currency, customer,
                  metadata as "metadata: Json<BTreeMap<String, String>>",
                  idempotency_key, failure_code as "decline_code!",
                  created_at as "declined_at: DateTime<Utc>"
           from destination.charge
           where destination = $1 and status = 'failed'
           order by number"#,
        destination,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| LedgerDecline {
            charge: row.id,
            amount: row.amount,
            currency: row.currency,
            customer: row.customer,
            metadata: row.metadata.0,
            idempotency_key: row.idempotency_key,
            decline_code: row.decline_code,
            declined_at: row.declined_at,
        })
        .collect())
}

pub(super) async fn refunds(pool: &PgPool, destination: &str) -> sqlx::Result<Vec<LedgerRefund>> {
    sqlx::query_as!(
        LedgerRefund,
        r#"select r.id, c.id as charge, r.amount, r.reason, r.idempotency_key,
                  r.created_at as "created_at: DateTime<Utc>"
           from destination.refund r
           join destination.charge c on c.number = r.charge_number
           where r.destination = $1
           order by r.number"#,
        destination,
    )
    .fetch_all(pool)
    .await
}

pub(super) async fn events(pool: &PgPool, destination: &str) -> sqlx::Result<Vec<LedgerEvent>> {
    sqlx::query_as!(
        LedgerEvent,
        r#"select id, channel, subject, body as "body!: serde_json::Value",
                  true as "signature_valid!",
                  received_at as "received_at: DateTime<Utc>"
           from destination.webhook_event
           where destination = $1
           order by number"#,
        destination,
    )
    .fetch_all(pool)
    .await
}
