//! After a restore (docs/DESIGN.md §21, "After a restore"): the archive lives outside the
//! database, so a backup taken before some archiving comes back without the tombstones of what
//! was archived since. A workflow the backup held comes back hot, and the archiver writes it
//! again. A workflow started after the backup and archived before the restore comes back as
//! nothing at all: its creation key and request keys would be free to start and send again. Its
//! record is still in the archive; [`reconcile`] writes its tombstone again from it.

use std::collections::HashMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use super::file::{ArchiveDir, Placed};
use super::{ArchiveError, Archived, read_record, rows};
use crate::store::archive::{self as store, Tombstone};

/// Tombstones written per statement.
const AT_ONCE: usize = 1_000;

/// What [`reconcile`] read and did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reconciled {
    /// Members read: the one holding the newest tombstone's record and every one after it.
    pub members: usize,
    /// Bytes of the members the restored tombstones point at: written and counted after the
    /// backup, whose totals lack them.
    pub bytes_restored: i64,
    /// Workflows whose tombstones were written again from their records.
    pub restored: Vec<Uuid>,
    /// Workflows the database holds hot again; the archiver writes them again once eligible.
    /// Where the archive keeps their later copy is noted ([`copy_of`] reads it back).
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
    let mut members_restored = std::collections::BTreeSet::new();
    let tombstones: Vec<Tombstone> = tombstones.into_values().collect();
    for chunk in tombstones.chunks(AT_ONCE) {
        let restored = store::restore_tombstones(&mut conn, chunk).await?;
        let (ids, keys): (Vec<Uuid>, Vec<String>) = chunk
            .iter()
            .filter(|t| !restored.contains(&t.id))
            .map(|t| (t.id, t.creation_key.clone()))
            .unzip();
        let mut hot_again = Vec::new();
        for (id, same) in store::hot_or_key_taken(&mut conn, &ids, &keys).await? {
            match same {
                true => hot_again.push(id),
                false => reconciled.key_taken.push(id),
            }
        }
        let copies: Vec<&Tombstone> = chunk.iter().filter(|t| hot_again.contains(&t.id)).collect();
        store::note_copies(&mut conn, &copies).await?;
        reconciled.hot_again.extend(hot_again);
        for t in chunk.iter().filter(|t| restored.contains(&t.id)) {
            members_restored.insert((t.archive_file.clone(), t.member_offset, t.member_length));
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
    // The totals are the backup's: they gain what left the hot tables since and is back as a
    // tombstone, with its members' bytes (a workflow hot again is counted when the archiver
    // writes it again), so reconciling twice adds nothing the second time.
    reconciled.bytes_restored = members_restored.iter().map(|(_, _, length)| length).sum();
    let restored = i64::try_from(reconciled.restored.len()).unwrap_or(i64::MAX);
    store::count(&mut conn, (restored, 0, 0, reconciled.bytes_restored)).await?;
    Ok(reconciled)
}

/// The tombstone of every workflow record in the members of `dir` from `from` (file, offset)
/// onwards, the last copy of each workflow winning, and how many members were read.
fn read_since(
    dir: &ArchiveDir,
    from: Option<(String, i64)>,
) -> Result<(usize, HashMap<Uuid, Tombstone>), ArchiveError> {
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
                tombstones.insert(tombstone.id, tombstone);
            }
            members += 1;
        }
    }
    Ok((members, tombstones))
}

/// The `archived_workflow` row the archiver wrote for `record` at `place`
/// (`z29c_archive_workflows`), rebuilt from the rows the record holds.
fn tombstone(record: &Value, place: &Placed) -> Option<Tombstone> {
    let (evidence, workflow) = (&record["evidence"], &record["evidence"]["workflow"]);
    let request_keys = rows(evidence, "requests")
        .filter_map(|q| q["request_key"].as_str().map(str::to_owned))
        .collect();
    let incident_references = rows(evidence, "incidents").flat_map(|i| rows(i, "references"));
    let mut references: Vec<String> = rows(evidence, "receipts")
        .chain(incident_references)
        .chain(rows(evidence, "compensation"))
        .filter_map(|r| r["external_reference"].as_str().map(str::to_owned))
        .collect();
    references.sort_unstable();
    references.dedup();
    Some(Tombstone {
        id: field(&record["id"])?,
        creation_key: field(&workflow["creation_key"])?,
        definition_name: field(&workflow["definition_name"])?,
        definition_version: field(&workflow["definition_version"])?,
        state: field(&workflow["state"])?,
        input_digest: field(&workflow["input_digest"])?,
        created_at: field(&workflow["created_at"])?,
        // Records written before the workflow kept its settle time carry its last update.
        settled_at: field(&workflow["settled_at"]).or_else(|| field(&workflow["updated_at"]))?,
        archived_at: field(&record["archived_at"])?,
        request_keys,
        external_references: references,
        archive_file: place.file.clone(),
        member_offset: i64::try_from(place.offset).ok()?,
        member_length: i64::try_from(place.length).ok()?,
    })
}

/// One column of a record's row, as stored.
fn field<T: DeserializeOwned>(value: &Value) -> Option<T> {
    T::deserialize(value).ok()
}

/// The later copy the archive keeps of workflow `id`, which a restored database holds hot again,
/// if reconciling noted one: the tombstone its record would make, and its evidence. The copy may
/// know what the backup did not, such as the receipt of a call it saw in flight.
pub async fn copy_of(
    pool: &PgPool,
    dir: &ArchiveDir,
    id: Uuid,
) -> Result<Option<Archived>, ArchiveError> {
    let Some(noted) = store::copy_place(pool, id).await? else {
        return Ok(None);
    };
    let place = Placed::stored(noted.archive_file, noted.member_offset, noted.member_length);
    let mut record = read_record(dir, place.clone(), id).await?;
    let tombstone =
        tombstone(&record, &place).ok_or(ArchiveError::Unreadable(place.file, place.offset))?;
    Ok(Some(Archived {
        tombstone,
        evidence: record["evidence"].take(),
    }))
}
