//! Retention and the archive (docs/DESIGN.md §21): a settled workflow past its retention
//! leaves the hot tables with its whole evidence written first, a tombstone keeps its keys,
//! and nothing unsettled, in review or inside an idempotency window ever leaves.

use std::path::Path;

use destinations::Kind;
use engine::archive::{ArchiveDir, Archiver, Policy};
use engine::intake::{NewWorkflow, StartError, Started, start_workflow};
use engine::store::journal::Actor;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::operate::{reviewing, unknown_delivery};
use crate::support::Harness;

pub(crate) fn archiver(pool: &PgPool, dir: &Path, policy: Policy) -> Archiver {
    Archiver::new(pool.clone(), ArchiveDir::open(dir).unwrap(), policy)
}

/// Moves `workflow`'s settling, and its requests' sending, `days` into the past.
pub(crate) async fn age(pool: &PgPool, workflow: Uuid, days: i32) {
    sqlx::query(
        "update workflow set settled_at = settled_at - make_interval(days => $2) where id = $1",
    )
    .bind(workflow)
    .bind(days)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "update external_request q
         set first_sent_at = first_sent_at - make_interval(days => $2),
             last_sent_at = last_sent_at - make_interval(days => $2)
         from step s where s.id = q.step_id and s.workflow_id = $1",
    )
    .bind(workflow)
    .bind(days)
    .execute(pool)
    .await
    .unwrap();
}

/// Whether `workflow` is still in the hot tables.
pub(crate) async fn hot(pool: &PgPool, workflow: Uuid) -> bool {
    sqlx::query_scalar("select exists (select 1 from workflow where id = $1)")
        .bind(workflow)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Drives `workflow` until it completed.
pub(crate) async fn settle(h: &Harness, workflow: Uuid) {
    h.drive_until(workflow, "notify", "succeeded").await;
    assert_eq!(h.workflow_state(workflow).await, "completed");
}

pub(crate) async fn archive_now(archiver: &Archiver) -> engine::archive::Moved {
    archiver
        .turn(std::time::Duration::from_secs(30))
        .await
        .unwrap()
        .0
}

/// The adapter `docs` declares that its provider keeps keys this long.
async fn keys_kept_for_days(pool: &PgPool, days: i64) {
    sqlx::query(
        "update adapter set declared = declared || jsonb_build_object('idempotency_retention_ms', $1::bigint)
         where name = 'docs'",
    )
    .bind(days * 86_400_000)
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_settled_workflow_past_its_retention_leaves_with_its_evidence_and_reads_back(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let w = h.start("archive-1").await;
    let kept = h.start("archive-2").await;
    settle(&h, w).await;
    settle(&h, kept).await;
    let (_, reference) = h.receipt(w, "deliver").await.unwrap();
    age(&h.pool, w, 31).await;
    age(&h.pool, kept, 29).await;

    let moved = archive_now(&archiver(&h.pool, dir.path(), Policy::default())).await;
    assert_eq!((moved.workflows, moved.batches), (1, 1));
    assert!(!hot(&h.pool, w).await, "its rows left the hot tables");
    assert!(
        hot(&h.pool, kept).await,
        "a workflow inside its retention stays"
    );
    let steps: i64 = sqlx::query_scalar("select count(*) from step where workflow_id = $1")
        .bind(w)
        .fetch_one(&h.pool)
        .await
        .unwrap();
    assert_eq!(steps, 0);

    let archived = engine::archive::show(&h.pool, &ArchiveDir::at(dir.path()), w)
        .await
        .unwrap()
        .expect("archived");
    let t = &archived.tombstone;
    assert_eq!(t.creation_key, "archive-1");
    assert_eq!(
        t.request_keys,
        vec![Harness::key(w, "deliver"), Harness::key(w, "notify")]
    );
    assert!(t.external_references.contains(&reference));
    let e = &archived.evidence;
    assert!(
        e["receipts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["external_reference"] == reference.as_str())
    );
    assert!(e["attempts"].as_array().is_some_and(|a| a.len() == 2));
    assert!(
        e["audit"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["action"] == "start_workflow"),
        "the audit entries naming it went with it"
    );
    let status = archived.status();
    assert_eq!(status.state, engine::domain::WorkflowState::Completed);
    assert!(status.archived_at.is_some());
    let deliver = status
        .steps
        .iter()
        .find(|s| s.logical == "deliver")
        .unwrap();
    assert_eq!(
        (deliver.label, deliver.external_reference.as_deref()),
        ("Succeeded", Some(reference.as_str()))
    );

    let verified = engine::archive::verify(&h.pool, &ArchiveDir::at(dir.path()))
        .await
        .unwrap();
    assert_eq!((verified.tombstones, verified.records), (1, 1));
    assert!(verified.findings.is_empty(), "{:?}", verified.findings);
    assert!(
        engine::watch::invariants::orphans(&h.pool)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        h.effects(&Harness::key(w, "deliver")).await,
        1,
        "nothing resent"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn nothing_unsettled_or_in_review_is_ever_archived(pool: PgPool) {
    let h = reviewing(pool, Kind::Opaque, 1_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let (in_review, _) = unknown_delivery(&h, "review-1", "review_required").await;
    let pending = h.start("pending-1").await;
    for w in [in_review, pending] {
        age(&h.pool, w, 400).await;
    }
    let moved = archive_now(&archiver(&h.pool, dir.path(), Policy::default())).await;
    assert_eq!(moved.workflows, 0);
    assert!(hot(&h.pool, in_review).await && hot(&h.pool, pending).await);
    let status = engine::archive::status(&h.pool, &Policy::default())
        .await
        .unwrap();
    assert_eq!(status.oldest_eligible, None);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_request_key_inside_its_providers_retention_keeps_its_workflow_hot_until_it_passes(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    keys_kept_for_days(&h.pool, 90).await;
    let w = h.start("window-1").await;
    settle(&h, w).await;
    age(&h.pool, w, 60).await;
    let archiver = archiver(&h.pool, dir.path(), Policy::default());
    assert_eq!(archive_now(&archiver).await.workflows, 0);
    assert!(hot(&h.pool, w).await, "the provider still keeps the key");
    age(&h.pool, w, 31).await;
    assert_eq!(archive_now(&archiver).await.workflows, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_definitions_own_retention_is_what_its_workflows_wait_for(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let v3 = include_str!("../../../definitions/document_delivery.v2.yaml")
        .replace("version: 2", "version: 3\nretention: { settled: 90d }");
    engine::definition::apply(
        &h.pool,
        &v3,
        Actor::Engine("test"),
        engine::definition::ApplyOptions::default(),
    )
    .await
    .unwrap();
    let w = h.start("kept-longer").await;
    settle(&h, w).await;
    age(&h.pool, w, 31).await;
    let archiver = archiver(&h.pool, dir.path(), Policy::default());
    assert_eq!(archive_now(&archiver).await.workflows, 0, "90 days, not 30");
    age(&h.pool, w, 60).await;
    assert_eq!(archive_now(&archiver).await.workflows, 1);
}

/// A document delivery under the creation key `once-only`, with `input`.
async fn start_once_only(h: &Harness, input: serde_json::Value) -> Result<Started, StartError> {
    let new = NewWorkflow {
        creation_key: "once-only".to_owned(),
        definition: "document_delivery".to_owned(),
        version: None,
        input,
    };
    start_workflow(&h.pool, new, Actor::Api("test")).await
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_creation_key_of_an_archived_workflow_answers_that_workflow_and_starts_nothing(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let w = h.start("once-only").await;
    settle(&h, w).await;
    age(&h.pool, w, 31).await;
    archive_now(&archiver(&h.pool, dir.path(), Policy::default())).await;

    let again = h.start("once-only").await;
    assert_eq!(again, w, "the archived workflow answers");
    assert!(!hot(&h.pool, w).await, "and nothing new was recorded");
    let other = start_once_only(
        &h,
        json!({"adapter": "docs", "recipient": "r-2", "document": {"title": "x", "body": "y"}}),
    )
    .await;
    assert!(
        matches!(other, Err(StartError::CreationKeyConflict { .. })),
        "{other:?}"
    );
    let started = start_once_only(
        &h,
        json!({"adapter": "docs", "recipient": "r-1", "document": {"title": "once-only", "body": "hello"}}),
    )
    .await
    .unwrap();
    assert!(matches!(started, Started::Archived(_)));
    h.drive_for(std::time::Duration::from_millis(200)).await;
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_record_written_by_an_archiver_that_died_before_its_commit_is_written_again_and_the_tombstone_names_one(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let w = h.start("twice").await;
    settle(&h, w).await;
    age(&h.pool, w, 31).await;
    // What a batch killed after its write leaves: a durable record, the rows still hot, and
    // the next member's bytes half written.
    let archive = ArchiveDir::open(dir.path()).unwrap();
    let today = chrono::Utc::now().date_naive();
    let line =
        json!({ "format": engine::archive::FORMAT, "kind": "workflow", "id": w, "evidence": {} });
    let first = archive.append(today, &[line.to_string()]).unwrap();
    let file = dir.path().join(&first.file);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(b"\x1f\x8b half a member");
    std::fs::write(&file, bytes).unwrap();

    assert_eq!(
        archive_now(&archiver(&h.pool, dir.path(), Policy::default()))
            .await
            .workflows,
        1
    );
    let archived = engine::archive::show(&h.pool, &archive, w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(archived.tombstone.member_offset, first.length as i64);
    assert!(
        archived.evidence["steps"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    );
    let verified = engine::archive::verify(&h.pool, &archive).await.unwrap();
    assert!(verified.findings.is_empty(), "{:?}", verified.findings);
    assert_eq!(
        verified.records, 2,
        "written twice, found once by its tombstone"
    );
}

/// A sign-in's audit entry (naming no workflow) from 401 days ago: past the default audit
/// retention.
async fn old_sign_in(pool: &PgPool) {
    sqlx::query(
        "insert into audit (at, actor, actor_kind, action, details)
         values (now() - interval '401 days', 'olga', 'operator', 'sign_in', '{}')",
    )
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn old_audit_entries_are_archived_and_events_every_consumer_passed_are_dropped(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    old_sign_in(&h.pool).await;
    let w = h.start("events").await;
    settle(&h, w).await;
    let events: i64 = sqlx::query_scalar("select count(*) from outbox")
        .fetch_one(&h.pool)
        .await
        .unwrap();
    assert!(events > 0);
    let events_at_once = Policy {
        events: std::time::Duration::ZERO,
        ..Policy::default()
    };
    let unpublished = archive_now(&archiver(&h.pool, dir.path(), events_at_once)).await;
    assert_eq!((unpublished.audit_entries, unpublished.events), (1, 0));
    // The publisher passes them all.
    sqlx::query(
        "update outbox_cursor set (txid, id) = (select txid, id from outbox order by txid desc, id desc limit 1)
         where reader = 'publisher'",
    )
    .execute(&h.pool)
    .await
    .unwrap();
    let passed = archive_now(&archiver(&h.pool, dir.path(), events_at_once)).await;
    assert_eq!(passed.events, events);
    let sign_ins: i64 = sqlx::query_scalar("select count(*) from audit where action = 'sign_in'")
        .fetch_one(&h.pool)
        .await
        .unwrap();
    assert_eq!(sign_ins, 0);
    let verified = engine::archive::verify(&h.pool, &ArchiveDir::at(dir.path()))
        .await
        .unwrap();
    assert_eq!(verified.records, 1, "the audit entry is in the archive");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_unsettled_workflow_is_never_removed_nor_append_only_rows_deleted_by_hand(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("unsettled").await;
    let refused = sqlx::query("select z29c_archive_workflows(array[$1::uuid], 'x.jsonl.gz', 0, 1)")
        .bind(w)
        .execute(&h.pool)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("unsettled"), "{refused}");
    let refused = sqlx::query("delete from receipt")
        .execute(&h.pool)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("append-only"), "{refused}");
    assert!(hot(&h.pool, w).await);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_archiver_runs_as_the_role_z29c_runs_as(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let dir = tempfile::tempdir().unwrap();
    let w = h.start("as-the-app").await;
    settle(&h, w).await;
    age(&h.pool, w, 31).await;
    old_sign_in(&h.pool).await;
    let role = crate::privileges::application_role(&h.pool).await;
    let statement = format!("set role {role}");
    let options = (*h.pool.connect_options()).clone();
    let as_app = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .after_connect(move |conn, _| {
            let statement = statement.clone();
            Box::pin(async move {
                sqlx::query(&statement).execute(conn).await?;
                Ok(())
            })
        })
        .connect_with(options)
        .await
        .unwrap();
    let moved = archive_now(&archiver(&as_app, dir.path(), Policy::default())).await;
    assert_eq!((moved.workflows, moved.audit_entries), (1, 1));
    assert!(!hot(&h.pool, w).await);
}
