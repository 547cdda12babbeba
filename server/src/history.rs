//! `z29c adapter history NAME` and `z29c definitions history NAME`: every version of a
//! configuration file, who applied it and when, and what it changed from the version before
//! (docs/DESIGN.md §15).

use std::process::ExitCode;

use serde_json::json;

use crate::database::{Database, DatabaseArgs};

/// One version as the history shows it.
struct Version {
    version: i32,
    applied_by: String,
    applied_at: chrono::DateTime<chrono::Utc>,
    source: String,
}

/// `z29c adapter history NAME`.
pub(crate) async fn adapter(
    name: &str,
    json: bool,
    database: &DatabaseArgs,
) -> anyhow::Result<ExitCode> {
    let db = Database::open(database).await?;
    let rows = engine::store::adapter_version::versions(&db.pool, name).await;
    db.close().await?;
    let versions = rows?
        .into_iter()
        .map(|r| Version {
            version: r.version,
            applied_by: r.applied_by,
            applied_at: r.applied_at,
            source: r.source,
        })
        .collect();
    print(&format!("adapter `{name}`"), name, versions, json).await
}

/// `z29c definitions history NAME`.
pub(crate) async fn definition(
    name: &str,
    json: bool,
    database: &DatabaseArgs,
) -> anyhow::Result<ExitCode> {
    let db = Database::open(database).await?;
    let rows = engine::store::definition::history(&db.pool, name).await;
    db.close().await?;
    let versions = rows?
        .into_iter()
        .map(|(r, source)| Version {
            version: r.version,
            applied_by: r.applied_by,
            applied_at: r.applied_at,
            source,
        })
        .collect();
    print(&format!("definition `{name}`"), name, versions, json).await
}

/// Each version, oldest first, with its diff from the one before (the first in full).
async fn print(
    what: &str,
    name: &str,
    versions: Vec<Version>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if versions.is_empty() {
        eprintln!("no {what} was ever applied");
        return Ok(ExitCode::FAILURE);
    }
    let mut before: Option<&Version> = None;
    for version in &versions {
        let diff = engine::diff::unified_off_thread(
            before.map(|b| b.source.clone()).unwrap_or_default(),
            version.source.clone(),
            before.map_or_else(|| "(none)".to_owned(), |b| format!("{name} v{}", b.version)),
            format!("{name} v{}", version.version),
        )
        .await;
        if json {
            println!(
                "{}",
                json!({ "name": name, "version": version.version, "applied_by": version.applied_by,
                        "applied_at": version.applied_at, "diff": diff })
            );
        } else {
            println!(
                "v{}  applied by {}  {}\n{diff}",
                version.version,
                version.applied_by,
                version.applied_at.format("%Y-%m-%d %H:%M:%SZ")
            );
        }
        before = Some(version);
    }
    Ok(ExitCode::SUCCESS)
}
