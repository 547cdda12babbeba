//! External request identities (docs/DESIGN.md §2): the key and digest bound before any byte
//! is sent, never rebound to other bytes.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

/// The request identity to persist at checkpoint 3.
#[derive(Debug, Clone)]
pub struct RequestIdentity<'a> {
    pub key: &'a str,
    pub step: Uuid,
    pub digest: &'a str,
    pub summary: &'a Value,
    pub adapter: &'a str,
    pub contract_version: i32,
}

/// Persists the request identity unless it exists, and returns the digest bound to the key:
/// the caller compares it with the regenerated request's and refuses to send on a mismatch.
pub async fn bind_request(
    conn: &mut PgConnection,
    request: &RequestIdentity<'_>,
) -> sqlx::Result<String> {
    // First binding: one round trip. A key bound before (a resend) is read back instead.
    let inserted = sqlx::query_scalar!(
        r#"insert into external_request (request_key, step_id, input_digest, summary, adapter, contract_version, replaces_key)
           values ($1, $2, $3, $4, $5, $6,
                   (select o.request_key from step s join step o on o.id = s.replaces_step_id where s.id = $2))
           on conflict (request_key) do nothing
           returning input_digest"#,
        request.key,
        request.step,
        request.digest,
        request.summary,
        request.adapter,
        request.contract_version,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(digest) = inserted {
        return Ok(digest);
    }
    sqlx::query_scalar!(
        r#"select input_digest from external_request where request_key = $1"#,
        request.key
    )
    .fetch_one(conn)
    .await
}

/// What recovery reads of a bound request before deciding: the adapter contract version it
/// was prepared under, how long ago it was first sent in milliseconds (`None` before its first
/// send: a provider that forgets idempotency keys may have forgotten this one), and the
/// adapter's trusted contract and version as the database holds them now (a claim production
/// refuted a moment ago counts for nothing, whatever a worker loaded before).
pub struct SentUnder {
    pub contract_version: i32,
    pub first_sent_ms_ago: Option<u64>,
    pub adapter_version: Option<i32>,
    pub trusted: Option<crate::domain::SideEffectContract>,
}

/// [`SentUnder`] for the request bound to `key`, if one is.
pub async fn sent_under(conn: &mut PgConnection, key: &str) -> sqlx::Result<Option<SentUnder>> {
    let row = sqlx::query!(
        r#"select q.contract_version, (extract(epoch from now() - q.first_sent_at) * 1000)::bigint as age,
                  a.contract_version as "adapter_version?", a.contract as "trusted?"
           from external_request q left join adapter a on a.name = q.adapter
           where q.request_key = $1"#,
        key
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| SentUnder {
        contract_version: r.contract_version,
        first_sent_ms_ago: r.age.map(|ms| u64::try_from(ms).unwrap_or(0)),
        adapter_version: r.adapter_version,
        trusted: r.trusted.and_then(|c| serde_json::from_value(c).ok()),
    }))
}

/// The digest bound to `key` and its canonical summary.
pub async fn request_identity(
    conn: &mut PgConnection,
    key: &str,
) -> sqlx::Result<Option<(String, Value)>> {
    let row = sqlx::query!(
        r#"select input_digest, summary from external_request where request_key = $1"#,
        key
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.input_digest, r.summary)))
}
