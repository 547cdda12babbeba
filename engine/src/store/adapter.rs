//! The adapters Z29C may call, with the contracts their suites verified.

use sqlx::{Executor, Postgres};

use crate::domain::SideEffectContract;

/// An adapter as registered.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterRow {
    pub name: String,
    pub base_url: String,
    pub contract: SideEffectContract,
    pub contract_version: i32,
}

/// Registers `name` or replaces its URL and contract; a changed contract or URL bumps its
/// version (recovery refuses to act on a request sent under another version).
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
        r#"insert into adapter (name, base_url, contract, contract_version, verified_at)
           values ($1, $2, $3, 1, now())
           on conflict (name) do update
              set base_url = excluded.base_url,
                  contract = excluded.contract,
                  verified_at = now(),
                  contract_version = adapter.contract_version
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
        r#"select name, base_url, contract, contract_version from adapter order by name"#
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
            })
        })
        .collect()
}
