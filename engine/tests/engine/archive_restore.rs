//! A restore from a backup taken before some archiving (docs/DESIGN.md §21, "After a
//! restore"): what the archive holds and the restored database lacks gets its tombstone back,
//! so its creation key and request keys stay taken.

use destinations::Kind;
use engine::archive::{ArchiveDir, ArchiveError, Policy, Tombstone, reconcile};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::archive::{age, archive_now, archiver, hot, settle};
use crate::support::Harness;

/// Started, settled, and 31 days past it: eligible under the default policy.
async fn settled_long_ago(h: &Harness, creation_key: &str) -> Uuid {
    let w = h.start(creation_key).await;
    settle(h, w).await;
    age(&h.pool, w, 31).await;
    w
}

/// What a restored backup taken before `workflow` started holds of it: nothing. Its tombstone
/// was all the database still had, so removing it (as the owner) makes that database.
async fn forgotten(pool: &PgPool, workflow: Uuid) -> Tombstone {
    let tombstone = engine::store::archive::tombstone(pool, Some(workflow), None)
        .await
        .unwrap()
        .expect("archived");
    sqlx::query("delete from archived_workflow where id = $1")
        .bind(workflow)
        .execute(pool)
        .await
        .unwrap();
    tombstone
}

/// What a workflow the backup held and the archiver moved after it leaves: the workflow hot in
/// the restored database, and its record in the archive.
async fn archived_after_the_backup(pool: &PgPool, dir: &ArchiveDir, workflow: Uuid) {
    let mut conn = pool.acquire().await.unwrap();
    let evidence = engine::store::archive::evidence(&mut conn, &[workflow])
        .await
        .unwrap();
    let now = chrono::Utc::now();
    let line = json!({ "format": engine::archive::FORMAT, "kind": "workflow", "id": workflow,
                       "archived_at": now, "evidence": evidence[0].1 });
    dir.append(now.date_naive(), &[line.to_string()]).unwrap();
}

/// The archiver's totals: workflows and bytes.
async fn totals(pool: &PgPool) -> (i64, i64) {
    sqlx::query_as("select workflows, bytes from archive_progress")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The lengths of the archive's last `n` members, oldest first.
fn last_members(dir: &ArchiveDir, n: usize) -> Vec<i64> {
    let lengths: Vec<i64> = dir
        .manifests()
        .unwrap()
        .iter()
        .flat_map(|m| m.members.iter().map(|p| p.length as i64))
        .collect();
    lengths[lengths.len() - n..].to_vec()
}

fn sorted(mut tombstone: Tombstone) -> Tombstone {
    tombstone.external_references.sort();
    tombstone
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn after_a_restore_the_archive_gives_back_the_tombstones_of_what_the_backup_never_saw(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let archive = ArchiveDir::open(dir.path()).unwrap();
    let archiver = archiver(&h.pool, dir.path(), Policy::default());
    // Two batches the backup saw.
    settled_long_ago(&h, "restore-old").await;
    archive_now(&archiver).await;
    settled_long_ago(&h, "restore-known").await;
    archive_now(&archiver).await;
    // After the backup: two workflows started and archived, one the backup held archived too.
    let after = settled_long_ago(&h, "restore-after").await;
    let taken = settled_long_ago(&h, "restore-taken").await;
    assert_eq!(archive_now(&archiver).await.workflows, 2);
    let held = settled_long_ago(&h, "restore-held").await;
    archived_after_the_backup(&h.pool, &archive, held).await;
    // The restore, and someone starting a workflow under an archived key before reconciling.
    let original = forgotten(&h.pool, after).await;
    forgotten(&h.pool, taken).await;
    let again = h.start("restore-taken").await;
    assert_ne!(again, taken);
    // The backup's totals: the two batches it saw, not the third.
    let (written, third) = (totals(&h.pool).await.1, last_members(&archive, 2)[0]);
    let backup = (2, written - third);
    sqlx::query("update archive_progress set workflows = $1, bytes = $2")
        .bind(backup.0)
        .bind(backup.1)
        .execute(&h.pool)
        .await
        .unwrap();

    let reconciled = reconcile(&h.pool, &archive).await.unwrap();
    assert_eq!(reconciled.restored, vec![after]);
    assert_eq!(reconciled.hot_again, vec![held]);
    assert_eq!(reconciled.key_taken, vec![taken]);
    assert_eq!(
        reconciled.members, 3,
        "read from the newest member the database names, not the first"
    );
    assert_eq!(
        totals(&h.pool).await,
        (backup.0 + 1, backup.1 + third),
        "the totals gain the workflow restored and its batch's member"
    );
    let restored = engine::archive::show(&h.pool, &archive, after)
        .await
        .unwrap()
        .expect("its tombstone is back and its record reads back");
    assert_eq!(
        sorted(Tombstone {
            archived_at: original.archived_at,
            ..restored.tombstone
        }),
        sorted(original),
        "the tombstone the archiver wrote: keys, references and where its record lives"
    );
    assert!(
        restored.evidence["receipts"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    );
    assert_eq!(
        h.start("restore-after").await,
        after,
        "its creation key answers the archived workflow"
    );
    assert!(!hot(&h.pool, after).await, "and starts nothing");
    assert_eq!(h.effects(&Harness::key(after, "deliver")).await, 1);
    assert!(hot(&h.pool, held).await, "the archiver writes it again");

    let twice = reconcile(&h.pool, &archive).await.unwrap();
    assert!(twice.restored.is_empty(), "{twice:?}");
    assert_eq!(
        totals(&h.pool).await,
        (backup.0 + 1, backup.1 + third),
        "reconciling twice counts nothing twice"
    );
    let verified = engine::archive::verify(&h.pool, &archive).await.unwrap();
    assert!(verified.findings.is_empty(), "{:?}", verified.findings);

    let elsewhere = tempfile::tempdir().unwrap();
    let foreign = reconcile(&h.pool, &ArchiveDir::at(elsewhere.path())).await;
    assert!(
        matches!(foreign, Err(ArchiveError::Foreign { .. })),
        "an archive without the database's newest member is refused: {foreign:?}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn after_a_restore_a_workflow_back_hot_shows_the_copy_the_archive_kept_until_it_leaves_again(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let archive = ArchiveDir::open(dir.path()).unwrap();
    let archiver = archiver(&h.pool, dir.path(), Policy::default());
    let held = settled_long_ago(&h, "copy-held").await;
    let other = settled_long_ago(&h, "copy-other").await;
    archived_after_the_backup(&h.pool, &archive, held).await;
    assert!(
        engine::archive::copy_of(&h.pool, &archive, held)
            .await
            .unwrap()
            .is_none(),
        "nothing is noted before reconciling"
    );

    let reconciled = reconcile(&h.pool, &archive).await.unwrap();
    assert_eq!(reconciled.hot_again, vec![held]);
    let copy = engine::archive::copy_of(&h.pool, &archive, held)
        .await
        .unwrap()
        .expect("the copy is noted and reads back");
    assert_eq!(copy.tombstone.id, held);
    assert_eq!(copy.tombstone.creation_key, "copy-held");
    assert!(
        copy.evidence["receipts"]
            .as_array()
            .is_some_and(|r| !r.is_empty()),
        "the copy's evidence holds the receipt: {}",
        copy.evidence
    );
    assert!(
        engine::archive::copy_of(&h.pool, &archive, other)
            .await
            .unwrap()
            .is_none(),
        "a workflow the archive never held has no copy"
    );

    assert_eq!(archive_now(&archiver).await.workflows, 2);
    assert!(!hot(&h.pool, held).await);
    assert!(
        engine::archive::copy_of(&h.pool, &archive, held)
            .await
            .unwrap()
            .is_none(),
        "the note leaves with the workflow"
    );
    let again = engine::archive::show(&h.pool, &archive, held)
        .await
        .unwrap()
        .expect("archived again, under a tombstone");
    assert_ne!(again.tombstone.archived_at, copy.tombstone.archived_at);
}
