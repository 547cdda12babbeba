//! The adapters Z29C may call, with the contracts their suites verified.

use sqlx::{Executor, PgConnection, Postgres};

use crate::domain::SideEffectContract;

/// An adapter as registered.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterRow {
    pub name: String,
    pub base_url: String,
    /// The contract the engine trusts it with now (see `store_file`, `mark_verified`).
    pub contract: SideEffectContract,
    pub contract_version: i32,
    /// The adapter file of the current version, for an adapter applied from one.
    pub source: Option<String>,
    pub verified_version: Option<i32>,
    pub verified_against: Option<String>,
    pub demoted_reason: Option<String>,
}

/// Registers `name` or replaces its URL and contract, verified by the caller's contract suite
/// (`z29c adapter add`); a changed contract or URL bumps its version (recovery refuses to act
/// on a request sent under another version).
pub async fn upsert<'e, E>(
    executor: E,
    name: &str,
    base_url: &str,
    contract: &SideEffectContract,
) -> sqlx::Result<i32>
where
    E: Executor<'e, Database = Postgres>,
{
    let contract = serde_json::to_value(contract).expect("a contract serializes");
    sqlx::query_scalar!(
        r#"insert into adapter (name, base_url, contract, contract_version, verified_at, verified_version)
           values ($1, $2, $3, 1, now(), 1)
           on conflict (name) do update
              set base_url = excluded.base_url,
                  contract = excluded.contract,
                  verified_at = now(),
                  demoted_at = null,
                  demoted_reason = null,
                  contract_version = adapter.contract_version
                      + case when adapter.contract = excluded.contract
                                  and adapter.base_url = excluded.base_url then 0 else 1 end,
                  verified_version = adapter.contract_version
                      + case when adapter.contract = excluded.contract
                                  and adapter.base_url = excluded.base_url then 0 else 1 end
           returning contract_version"#,
        name,
        base_url,
        contract,
    )
    .fetch_one(executor)
    .await
}

/// Every registered adapter.
pub async fn all<'e, E>(executor: E) -> sqlx::Result<Vec<AdapterRow>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select name, base_url, contract, contract_version, source, verified_version,
                  verified_against, demoted_reason
           from adapter order by name"#
    )
    .fetch_all(executor)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(AdapterRow {
                name: r.name,
                base_url: r.base_url,
                contract: serde_json::from_value(r.contract)
                    .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
                contract_version: r.contract_version,
                source: r.source,
                verified_version: r.verified_version,
                verified_against: r.verified_against,
                demoted_reason: r.demoted_reason,
            })
        })
        .collect()
}

/// What storing an adapter file did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileStored {
    /// A new adapter, at version 1.
    Added { version: i32 },
    /// A new version of an adapter (its file changed).
    Changed { version: i32 },
    /// The very same file is the current version already.
    Unchanged { version: i32 },
}

/// An adapter file to store: the contract it declares, and the one the engine uses until that
/// version is verified (the declared one with unknown outcomes sent to review).
pub struct AdapterFile<'a> {
    pub name: &'a str,
    pub base_url: &'a str,
    pub source: &'a str,
    pub declared: &'a SideEffectContract,
    pub unverified: &'a SideEffectContract,
    pub applied_by: &'a str,
}

/// Stores `file` as a new adapter or a new version of one; every version is kept. A new
/// version is unverified: its suite must pass (`mark_verified`) before its claims are used.
pub async fn store_file(
    conn: &mut PgConnection,
    file: &AdapterFile<'_>,
) -> sqlx::Result<FileStored> {
    let current = sqlx::query!(
        r#"select source, contract_version from adapter where name = $1 for update"#,
        file.name
    )
    .fetch_optional(&mut *conn)
    .await?;
    let declared = serde_json::to_value(file.declared).expect("a contract serializes");
    let unverified = serde_json::to_value(file.unverified).expect("a contract serializes");
    let (version, stored) = match current {
        Some(row) if row.source.as_deref() == Some(file.source) => {
            return Ok(FileStored::Unchanged {
                version: row.contract_version,
            });
        }
        Some(row) => {
            let version = row.contract_version + 1;
            sqlx::query!(
                r#"update adapter set base_url = $2, contract = $3, contract_version = $4, source = $5,
                                      demoted_at = null, demoted_reason = null
                   where name = $1"#,
                file.name,
                file.base_url,
                unverified,
                version,
                file.source,
            )
            .execute(&mut *conn)
            .await?;
            (version, FileStored::Changed { version })
        }
        None => {
            sqlx::query!(
                r#"insert into adapter (name, base_url, contract, contract_version, source)
                   values ($1, $2, $3, 1, $4)"#,
                file.name,
                file.base_url,
                unverified,
                file.source,
            )
            .execute(&mut *conn)
            .await?;
            (1, FileStored::Added { version: 1 })
        }
    };
    sqlx::query!(
        r#"insert into adapter_version (name, version, source, contract, applied_by)
           values ($1, $2, $3, $4, $5)"#,
        file.name,
        version,
        file.source,
        declared,
        file.applied_by,
    )
    .execute(&mut *conn)
    .await?;
    Ok(stored)
}

/// The current file of adapter `name` and its version, if it was applied from a file.
pub async fn current_file<'e, E>(executor: E, name: &str) -> sqlx::Result<Option<(String, i32)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let row = sqlx::query!(
        r#"select source, contract_version from adapter where name = $1"#,
        name
    )
    .fetch_optional(executor)
    .await?;
    Ok(row.and_then(|r| r.source.map(|s| (s, r.contract_version))))
}

/// Records that version `version` of `name` passed its contract suite against `against`, with
/// the claims it checked: its declared contract is used from now on. False when another
/// version is current by now.
pub async fn mark_verified<'e, E>(
    executor: E,
    name: &str,
    version: i32,
    against: &str,
    claims: &[&str],
) -> sqlx::Result<bool>
where
    E: Executor<'e, Database = Postgres>,
{
    let claims = serde_json::Value::from(claims.to_vec());
    let updated = sqlx::query!(
        r#"update adapter a
              set contract = v.contract, verified_at = now(), verified_version = v.version,
                  verified_against = $3, verified_claims = $4, demoted_at = null, demoted_reason = null
             from adapter_version v
            where a.name = $1 and a.contract_version = $2 and v.name = a.name and v.version = $2"#,
        name,
        version,
        against,
        claims,
    )
    .execute(executor)
    .await?;
    Ok(updated.rows_affected() == 1)
}

/// The claim a contradiction seen in production disproves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contradicted {
    /// Two references for one key at an adapter declared idempotent.
    IdempotencyKey,
    /// A lookup found the key under another digest at an adapter declaring a lookup.
    Lookup,
}

/// Demotes the adapter of `step` to review when it declared the contradicted claim: its unknown
/// outcomes go to a person until its suite passes again (docs/DESIGN.md §16). Returns the
/// adapter's name when this call demoted it.
pub async fn demote_for_step(
    conn: &mut PgConnection,
    step: uuid::Uuid,
    contradicted: Contradicted,
    reason: &str,
) -> sqlx::Result<Option<String>> {
    let claim = match contradicted {
        Contradicted::IdempotencyKey => "accepts_idempotency_key",
        Contradicted::Lookup => "query_by_client_reference",
    };
    sqlx::query_scalar!(
        r#"update adapter a
              set contract = jsonb_set(a.contract, '{unknown_outcome_policy}', '"review"'),
                  demoted_at = now(), demoted_reason = $3
             from step s
            where s.id = $1 and a.name = s.adapter and a.demoted_at is null
              and (a.contract ->> $2)::boolean
           returning a.name"#,
        step,
        claim,
        reason,
    )
    .fetch_optional(conn)
    .await
}

/// A text that changes whenever any adapter is added or changes version, contract or trust.
pub async fn fingerprint<'e, E>(executor: E) -> sqlx::Result<String>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(
        r#"select coalesce(string_agg(name || ':' || contract_version || ':' || md5(contract::text),
                                      ',' order by name), '') as "fingerprint!"
           from adapter"#
    )
    .fetch_one(executor)
    .await
}
