//! After a restore (docs/DESIGN.md §21, "After a restore"): the archive lives outside the
//! database, so a backup taken before some archiving comes back without the tombstones of what
//! was archived since. A workflow the backup held comes back hot, and the archiver writes it
//! again. A workflow started after the backup and archived before the restore comes back as
//! nothing at all: its creation key and request keys would be free to start and send again. Its
//! record is still in the archive; [`reconcile`] writes its tombstone again from it.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Value, json};
use sqlx::PgPool;
use uuid::Uuid;

use super::file::{ArchiveDir, Placed};
use super::{ArchiveError, rows};
use crate::store::archive as store;

/// Tombstones written per statement.
const AT_ONCE: usize = 1_000;

/// What [`reconcile`] read and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reconciled {
    /// Members read: the one holding the newest tombstone's record and every one after it.
    pub members: usize,
    /// Workflows whose tombstones were written again from their records.
    pub restored: Vec<Uuid>,
    /// Workflows the database holds hot again; the archiver writes them again once eligible.
    pub hot_again: Vec<Uuid>,
    /// Archived workflows whose creation key a workflow started since the restore holds: two
    /// intents under one key, for a person to look at. No tombstone is written for them.
    pub key_taken: Vec<Uuid>,
}

/// Writes again the tombstone of every workflow the archive holds and the database lacks
/// altogether, reading only the members from the newest one the database's tombstones name
/// onwards. Run as the schema's owner (the application role writes no tombstone) with nothing
/// else running. Refuses an archive that lacks that newest member: it is not this database's.
pub async fn reconcile(owner: &PgPool, dir: &ArchiveDir) -> Result<Reconciled, ArchiveError> {
    let mut conn = owner.acquire().await?;
    let from = store::newest_member(&mut conn).await?;
    let dir = dir.clone();
    let (members, tombstones) = tokio::task::spawn_blocking(move || read_since(&dir, from))
        .await
        .map_err(std::io::Error::other)??;
    let mut reconciled = Reconciled {
        members,
        ..Reconciled::default()
    };
    let tombstones: Vec<Value> = tombstones.into_values().collect();
    for chunk in tombstones.chunks(AT_ONCE) {
        let restored = store::restore_tombstones(&mut conn, &Value::from(chunk)).await?;
        let (ids, keys): (Vec<Uuid>, Vec<String>) = chunk
            .iter()
            .filter_map(|t| {
                let id: Uuid = t["id"].as_str()?.parse().ok()?;
                Some((id, t["creation_key"].as_str()?.to_owned()))
            })
            .filter(|(id, _)| !restored.contains(id))
            .unzip();
        for (id, same) in store::hot_or_key_taken(&mut conn, &ids, &keys).await? {
            match same {
                true => reconciled.hot_again.push(id),
                false => reconciled.key_taken.push(id),
            }
        }
        reconciled.restored.extend(restored);
    }
    for list in [
        &mut reconciled.restored,
        &mut reconciled.hot_again,
        &mut reconciled.key_taken,
    ] {
        list.sort_unstable();
    }
    Ok(reconciled)
}

/// The tombstone of every workflow record in the members of `dir` from `from` (file, offset)
/// onwards, the last copy of each workflow winning, and how many members were read.
fn read_since(
    dir: &ArchiveDir,
    from: Option<(String, i64)>,
) -> Result<(usize, HashMap<Uuid, Value>), ArchiveError> {
    let manifests = dir.manifests()?;
    let (from_file, from_offset) = from.clone().unwrap_or_default();
    if from.is_some()
        && !manifests.iter().any(|m| {
            m.file == from_file && m.members.iter().any(|p| p.offset as i64 == from_offset)
        })
    {
        return Err(ArchiveError::Foreign {
            file: from_file,
            offset: from_offset,
        });
    }
    let (mut members, mut tombstones) = (0, HashMap::new());
    for manifest in manifests.iter().filter(|m| m.file >= from_file) {
        let since = |offset: u64| manifest.file > from_file || offset as i64 >= from_offset;
        for member in manifest.members.iter().filter(|p| since(p.offset)) {
            let place = Placed {
                file: manifest.file.clone(),
                offset: member.offset,
                length: member.length,
            };
            for line in dir.read_member(&place.file, place.offset, place.length)? {
                let record: Value = serde_json::from_str(&line).map_err(std::io::Error::other)?;
                if record["kind"] != "workflow" {
                    continue;
                }
                let tombstone = tombstone(&record, &place)
                    .ok_or_else(|| ArchiveError::Unreadable(place.file.clone(), place.offset))?;
                if let Some(id) = tombstone["id"].as_str().and_then(|id| id.parse().ok()) {
                    tombstones.insert(id, tombstone);
                }
            }
            members += 1;
        }
    }
    Ok((members, tombstones))
}

/// The `archived_workflow` row the archiver wrote for `record` at `place`
/// (`z29c_archive_workflows`), rebuilt from the rows the record holds.
fn tombstone(record: &Value, place: &Placed) -> Option<Value> {
    let (evidence, workflow) = (&record["evidence"], &record["evidence"]["workflow"]);
    let request_keys: Vec<&str> = rows(evidence, "requests")
        .filter_map(|q| q["request_key"].as_str())
        .collect();
    let incident_references = rows(evidence, "incidents").flat_map(|i| rows(i, "references"));
    let mut references: Vec<&str> = rows(evidence, "receipts")
        .chain(incident_references)
        .chain(rows(evidence, "compensation"))
        .filter_map(|r| r["external_reference"].as_str())
        .collect();
    references.sort_unstable();
    references.dedup();
    let text = |value: &Value| value.as_str().map(str::to_owned);
    Some(json!({
        "id": text(&record["id"])?,
        "creation_key": text(&workflow["creation_key"])?,
        "definition_name": text(&workflow["definition_name"])?,
        "definition_version": workflow["definition_version"].as_i64()?,
        "state": text(&workflow["state"])?,
        "input_digest": text(&workflow["input_digest"])?,
        "created_at": text(&workflow["created_at"])?,
        "settled_at": text(&workflow["updated_at"])?,
        "archived_at": text(&record["archived_at"])?,
        "request_keys": request_keys,
        "external_references": references,
        "archive_file": place.file,
        "member_offset": place.offset,
        "member_length": place.length,
    }))
}
