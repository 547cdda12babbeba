//! The adapters Z29C may call, and what verification proved of each claim of their current
//! version (docs/DESIGN.md §5): `declared` is what the file says, `contract` what the engine
//! acts on — the declared contract cut down to the verified claims.

use sqlx::{Executor, PgConnection, Postgres};

use crate::domain::{Claim, SideEffectContract, Trust, trusted_contract};

/// An adapter as registered.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterRow {
    pub name: String,
    pub base_url: String,
    /// The contract the engine acts on: the declared one cut down to the verified claims.
    pub contract: SideEffectContract,
    pub contract_version: i32,
    /// The adapter file of the current version, for an adapter applied from one.
    pub source: Option<String>,
    /// The version that passed verification last; the adapter sends only when it is current.
    pub verified_version: Option<i32>,
    pub verified_against: Option<String>,
    pub demoted_reason: Option<String>,
    /// The claims of the current version that verification proved.
    pub verified: Vec<Claim>,
}

impl AdapterRow {
    /// Whether the current version passed verification: only then does it send anything.
    pub fn may_send(&self) -> bool {
        self.verified_version == Some(self.contract_version)
    }
}

/// One claim of an adapter's current version, and what was found of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClaimRecord {
    pub claim: Claim,
    pub trust: Trust,
    /// What proved or refuted it; for a refuted claim, the contradiction.
    pub evidence: String,
    /// Each check that bore on it: `{"check", "verdict", "detail"}`.
    pub checks: serde_json::Value,
    /// The sandbox verification ran against; `None` for a contradiction seen in production.
    pub against: Option<String>,
}

/// Registers protocol adapter `name` at `base_url` with every claim of `claims` verified by
/// whoever calls this (`z29c adapter add` after its suite, the harness, tests), replacing its
/// URL and contract; a changed contract or URL bumps its version (recovery refuses to act on a
/// request sent under another version). Returns the version.
pub async fn upsert(
    conn: &mut PgConnection,
    name: &str,
    base_url: &str,
    contract: &SideEffectContract,
    claims: &[Claim],
) -> sqlx::Result<i32> {
    let declared = serde_json::to_value(contract).expect("a contract serializes");
    let version = sqlx::query_scalar!(
        r#"insert into adapter (name, base_url, declared, contract, contract_version, verified_at, verified_version)
           values ($1, $2, $3, $3, 1, now(), 1)
           on conflict (name) do update
              set base_url = excluded.base_url,
                  declared = excluded.declared,
                  contract = excluded.declared,
                  verified_at = now(),
                  demoted_at = null,
                  demoted_reason = null,
                  source = null,
                  contract_version = adapter.contract_version
                      + case when adapter.declared = excluded.declared and adapter.source is null
                                  and adapter.base_url = excluded.base_url then 0 else 1 end,
                  verified_version = adapter.contract_version
                      + case when adapter.declared = excluded.declared and adapter.source is null
                                  and adapter.base_url = excluded.base_url then 0 else 1 end
           returning contract_version"#,
        name,
        base_url,
        declared,
    )
    .fetch_one(&mut *conn)
    .await?;
    let records: Vec<ClaimRecord> = claims
        .iter()
        .map(|claim| ClaimRecord {
            claim: claim.clone(),
            trust: Trust::Verified,
            evidence: "registered as verified".to_owned(),
            checks: serde_json::json!([]),
            against: Some(base_url.to_owned()),
        })
        .collect();
    keep_claims(conn, name, version, &records).await?;
    Ok(version)
}

/// Every registered adapter, with the claims of its current version that were verified, its
/// `base_url` as stored ([`crate::adapter::apply::registered`] shows it as written).
pub async fn all<'e, E>(executor: E) -> sqlx::Result<Vec<AdapterRow>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select a.name, a.base_url, a.contract, a.contract_version, a.source, a.verified_version,
                  a.verified_against, a.demoted_reason,
                  array(select c.claim from adapter_claim c
                        where c.adapter = a.name and c.version = a.contract_version
                          and c.trust = 'verified' order by c.claim) as "verified!"
           from adapter a order by a.name"#
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
                verified: r.verified.iter().filter_map(|c| Claim::parse(c)).collect(),
            })
        })
        .collect()
}

/// The names of every registered adapter.
pub async fn names<'e, E>(executor: E) -> sqlx::Result<Vec<String>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!("select name from adapter order by name")
        .fetch_all(executor)
        .await
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

/// An adapter file to store, with the contract it declares.
pub struct AdapterFile<'a> {
    pub name: &'a str,
    pub base_url: &'a str,
    pub source: &'a str,
    pub declared: &'a SideEffectContract,
    pub applied_by: &'a str,
}

/// Stores `file` as a new adapter or a new version of one; every version is kept. A new
/// version has proven nothing: it sends nothing until verification passes
/// ([`record_verification`]), and its contract is the declared one with no claim counted.
/// Returns what it did, and the file of the version it replaced (for the audit's diff).
pub async fn store_file(
    conn: &mut PgConnection,
    file: &AdapterFile<'_>,
) -> sqlx::Result<(FileStored, Option<String>)> {
    let current = sqlx::query!(
        r#"select source, contract_version from adapter where name = $1 for update"#,
        file.name
    )
    .fetch_optional(&mut *conn)
    .await?;
    let declared = serde_json::to_value(file.declared).expect("a contract serializes");
    let unproven = serde_json::to_value(trusted_contract(file.declared, |_| false))
        .expect("a contract serializes");
    let (version, stored) = match current {
        Some(row) if row.source.as_deref() == Some(file.source) => {
            return Ok((
                FileStored::Unchanged {
                    version: row.contract_version,
                },
                None,
            ));
        }
        Some(row) => {
            let version = row.contract_version + 1;
            sqlx::query!(
                r#"update adapter set base_url = $2, declared = $3, contract = $4, contract_version = $5,
                                      source = $6, demoted_at = null, demoted_reason = null
                   where name = $1"#,
                file.name,
                file.base_url,
                declared,
                unproven,
                version,
                file.source,
            )
            .execute(&mut *conn)
            .await?;
            (version, (FileStored::Changed { version }, row.source))
        }
        None => {
            sqlx::query!(
                r#"insert into adapter (name, base_url, declared, contract, contract_version, source)
                   values ($1, $2, $3, $4, 1, $5)"#,
                file.name,
                file.base_url,
                declared,
                unproven,
                file.source,
            )
            .execute(&mut *conn)
            .await?;
            (1, (FileStored::Added { version: 1 }, None))
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

/// Records what a verification of version `version` of `name` against `against` found of each
/// claim, and, when it `passed`, that the version may send: its held steps are released. A
/// claim the run could not check keeps what an earlier run found; a conclusive finding replaces
/// it. The trusted contract is worked out again from the verified claims. False when another
/// version is current by now (nothing is recorded).
pub async fn record_verification(
    conn: &mut PgConnection,
    name: &str,
    version: i32,
    against: &str,
    claims: &[ClaimRecord],
    passed: bool,
) -> sqlx::Result<bool> {
    let current = sqlx::query_scalar!(
        "select contract_version from adapter where name = $1 for update",
        name
    )
    .fetch_optional(&mut *conn)
    .await?;
    if current != Some(version) {
        return Ok(false);
    }
    keep_claims(conn, name, version, claims).await?;
    if passed {
        sqlx::query!(
            r#"update adapter set verified_version = $2, verified_at = now(), verified_against = $3,
                                  demoted_at = null, demoted_reason = null
               where name = $1"#,
            name,
            version,
            against,
        )
        .execute(&mut *conn)
        .await?;
        super::held::release(conn, super::held::Releasing::Adapter(name), None).await?;
    }
    Ok(true)
}

/// Stores `claims` for `version` (an inconclusive one never replaces a conclusive finding) and
/// works the trusted contract out again.
async fn keep_claims(
    conn: &mut PgConnection,
    name: &str,
    version: i32,
    claims: &[ClaimRecord],
) -> sqlx::Result<()> {
    let rows = serde_json::to_value(
        claims
            .iter()
            .map(|c| {
                serde_json::json!({
                    "claim": c.claim.id(), "trust": c.trust, "evidence": c.evidence,
                    "checks": c.checks, "against": c.against,
                })
            })
            .collect::<Vec<_>>(),
    )
    .expect("claims serialize");
    sqlx::query!(
        r#"insert into adapter_claim (adapter, version, claim, trust, checks, evidence, against)
           select $1, $2, t.claim, t.trust::claim_trust, t.checks, t.evidence, t.against
           from jsonb_to_recordset($3) as t(claim text, trust text, checks jsonb, evidence text, against text)
           on conflict (adapter, version, claim) do update
              set trust = excluded.trust, checks = excluded.checks, evidence = excluded.evidence,
                  against = excluded.against, decided_at = now()
              where excluded.trust <> 'unverified'"#,
        name,
        version,
        rows,
    )
    .execute(&mut *conn)
    .await?;
    retrust(conn, name).await
}

/// Works out the contract the engine acts on from the declared one and the verified claims of
/// the current version.
async fn retrust(conn: &mut PgConnection, name: &str) -> sqlx::Result<()> {
    let row = sqlx::query!(
        r#"select a.declared,
                  array(select c.claim from adapter_claim c
                        where c.adapter = a.name and c.version = a.contract_version
                          and c.trust = 'verified') as "verified!"
           from adapter a where a.name = $1"#,
        name
    )
    .fetch_one(&mut *conn)
    .await?;
    let declared: SideEffectContract =
        serde_json::from_value(row.declared).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    let verified: Vec<Claim> = row
        .verified
        .iter()
        .filter_map(|c| Claim::parse(c))
        .collect();
    let trusted = trusted_contract(&declared, |claim| verified.contains(claim));
    sqlx::query!(
        "update adapter set contract = $2 where name = $1",
        name,
        serde_json::to_value(trusted).expect("a contract serializes"),
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The claims of `name`'s current version, in the order a file makes them.
pub async fn claims<'e, E>(executor: E, name: &str) -> sqlx::Result<Vec<ClaimRow>>
where
    E: Executor<'e, Database = Postgres>,
{
    let claims = claims_by_adapter(executor, Some(name)).await?;
    Ok(claims.into_iter().map(|(_, claim)| claim).collect())
}

/// The claims of every adapter's current version (of `name`'s only, when given), with their
/// adapter's name: by adapter, each adapter's in the order a file makes them.
pub async fn claims_by_adapter<'e, E>(
    executor: E,
    name: Option<&str>,
) -> sqlx::Result<Vec<(String, ClaimRow)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select c.adapter, c.claim, c.trust as "trust: Trust", c.evidence, c.checks, c.against,
                  c.decided_at as "decided_at: chrono::DateTime<chrono::Utc>"
           from adapter_claim c join adapter a on a.name = c.adapter and a.contract_version = c.version
           where $1::text is null or c.adapter = $1"#,
        name
    )
    .fetch_all(executor)
    .await?;
    let mut claims: Vec<(String, ClaimRow)> = rows
        .into_iter()
        .filter_map(|r| {
            let row = ClaimRow {
                claim: Claim::parse(&r.claim)?,
                trust: r.trust,
                evidence: r.evidence,
                checks: r.checks,
                against: r.against,
                decided_at: r.decided_at,
            };
            Some((r.adapter, row))
        })
        .collect();
    // In the order a file makes them: delivery, the capabilities, the rules, the provocations.
    claims.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.claim.cmp(&b.1.claim)));
    Ok(claims)
}

/// A stored claim, as pages and the API show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClaimRow {
    pub claim: Claim,
    pub trust: Trust,
    pub evidence: String,
    pub checks: serde_json::Value,
    pub against: Option<String>,
    pub decided_at: chrono::DateTime<chrono::Utc>,
}

/// Records that production contradicted `claim` of the adapter of `step` (two references for
/// one key, a lookup finding the key under another digest): the claim is refuted for the
/// current version with `evidence`, it permits nothing from now on, and the adapter is marked
/// demoted (the `adapter_demoted` alert). Returns the adapter's name when this refuted it.
pub async fn refute_for_step(
    conn: &mut PgConnection,
    step: uuid::Uuid,
    claim: Claim,
    evidence: &str,
) -> sqlx::Result<Option<String>> {
    let Some(adapter) = sqlx::query!(
        r#"select a.name, a.contract_version, a.declared from step s join adapter a on a.name = s.adapter
           where s.id = $1 for update of a"#,
        step
    )
    .fetch_optional(&mut *conn)
    .await?
    else {
        return Ok(None);
    };
    // Only a claim the file made can be refuted: a duplicate after an operator's authorized
    // attempt at an opaque adapter contradicts nothing it said.
    let declared: SideEffectContract =
        serde_json::from_value(adapter.declared).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    let made = match claim {
        Claim::IdempotencyKey => declared.accepts_idempotency_key,
        Claim::Lookup => declared.query_by_client_reference,
        _ => true,
    };
    if !made {
        return Ok(None);
    }
    let already = sqlx::query_scalar!(
        r#"select exists(select 1 from adapter_claim where adapter = $1 and version = $2
                         and claim = $3 and trust = 'refuted') as "refuted!""#,
        adapter.name,
        adapter.contract_version,
        claim.id(),
    )
    .fetch_one(&mut *conn)
    .await?;
    if already {
        return Ok(None);
    }
    let record = ClaimRecord {
        claim,
        trust: Trust::Refuted,
        evidence: evidence.to_owned(),
        checks: serde_json::json!([{ "check": "production", "verdict": "contradicted", "detail": evidence }]),
        against: None,
    };
    keep_claims(conn, &adapter.name, adapter.contract_version, &[record]).await?;
    sqlx::query!(
        "update adapter set demoted_at = now(), demoted_reason = $2 where name = $1",
        adapter.name,
        evidence,
    )
    .execute(&mut *conn)
    .await?;
    Ok(Some(adapter.name))
}

/// A text that changes whenever any adapter is added or changes version, contract or trust.
pub async fn fingerprint<'e, E>(executor: E) -> sqlx::Result<String>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(
        r#"select coalesce(string_agg(name || ':' || contract_version || ':' || md5(contract::text)
                                      || ':' || coalesce(verified_version, 0)
                                      || ':' || coalesce(verified_at::text, '')
                                      || ':' || coalesce(demoted_at::text, '')
                                      || ':' || coalesce((select max(c.decided_at)::text from adapter_claim c
                                                          where c.adapter = a.name), ''),
                                      ',' order by name), '') as "fingerprint!"
           from adapter a"#
    )
    .fetch_one(executor)
    .await
}
