//! Applied definition files, immutable once stored.

use sqlx::{Executor, Postgres};

/// One applied definition, as `z29c definitions list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionRow {
    pub name: String,
    pub version: i32,
    pub digest: String,
    pub applied_by: String,
    pub applied_at: chrono::DateTime<chrono::Utc>,
}

/// A definition file about to be stored.
#[derive(Debug, Clone, Copy)]
pub struct NewDefinition<'a> {
    pub name: &'a str,
    pub version: i32,
    pub source: &'a str,
    pub digest: &'a str,
    pub applied_by: &'a str,
    /// The file's own retention of settled workflows (docs/DESIGN.md §21).
    pub retain_settled: Option<std::time::Duration>,
}

/// Stores a definition file unless one is stored under its name and version; returns whether
/// it was stored (false: another file, or this one, got there first).
pub async fn insert<'e, E>(executor: E, new: NewDefinition<'_>) -> sqlx::Result<bool>
where
    E: Executor<'e, Database = Postgres>,
{
    let stored = sqlx::query!(
        r#"insert into definition (name, version, source, digest, applied_by, retain_settled)
           values ($1, $2, $3, $4, $5, make_interval(secs => $6))
           on conflict (name, version) do nothing"#,
        new.name,
        new.version,
        new.source,
        new.digest,
        new.applied_by,
        new.retain_settled.map(|d| d.as_secs_f64()),
    )
    .execute(executor)
    .await?;
    Ok(stored.rows_affected() == 1)
}

/// The file stored as `name` version `version`.
pub async fn source<'e, E>(executor: E, name: &str, version: i32) -> sqlx::Result<Option<String>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(
        r#"select source from definition where name = $1 and version = $2"#,
        name,
        version
    )
    .fetch_optional(executor)
    .await
}

/// The newest version of `name` below `version`, with its file.
pub async fn newest_before<'e, E>(
    executor: E,
    name: &str,
    version: i32,
) -> sqlx::Result<Option<(i32, String)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let row = sqlx::query!(
        r#"select version, source from definition where name = $1 and version < $2
           order by version desc limit 1"#,
        name,
        version
    )
    .fetch_optional(executor)
    .await?;
    Ok(row.map(|r| (r.version, r.source)))
}

/// Every version of `name`, oldest first, with who applied it and its file.
pub async fn history<'e, E>(executor: E, name: &str) -> sqlx::Result<Vec<(DefinitionRow, String)>>
where
    E: Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query!(
        r#"select name, version, digest, applied_by,
                  applied_at as "applied_at: chrono::DateTime<chrono::Utc>", source
           from definition where name = $1 order by version"#,
        name
    )
    .fetch_all(executor)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                DefinitionRow {
                    name: r.name,
                    version: r.version,
                    digest: r.digest,
                    applied_by: r.applied_by,
                    applied_at: r.applied_at,
                },
                r.source,
            )
        })
        .collect())
}

/// The newest version applied under `name`.
pub async fn newest_version<'e, E>(executor: E, name: &str) -> sqlx::Result<Option<i32>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(
        r#"select max(version) from definition where name = $1"#,
        name
    )
    .fetch_one(executor)
    .await
}

/// Every applied definition, by name and version.
pub async fn all<'e, E>(executor: E) -> sqlx::Result<Vec<DefinitionRow>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        DefinitionRow,
        r#"select name, version, digest, applied_by, applied_at as "applied_at: _"
           from definition order by name, version"#
    )
    .fetch_all(executor)
    .await
}
