//! Every version of every adapter file, as applied: immutable, the history `z29c adapter
//! history` reads.

use sqlx::{Executor, Postgres};

/// One stored version of an adapter file, as `z29c adapter history` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRow {
    pub version: i32,
    pub applied_by: String,
    pub applied_at: chrono::DateTime<chrono::Utc>,
    pub source: String,
}

/// Every stored version of adapter `name`, oldest first.
pub async fn versions<'e, E>(executor: E, name: &str) -> sqlx::Result<Vec<VersionRow>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        VersionRow,
        r#"select version, applied_by, applied_at as "applied_at: _", source
           from adapter_version where name = $1 order by version"#,
        name
    )
    .fetch_all(executor)
    .await
}
