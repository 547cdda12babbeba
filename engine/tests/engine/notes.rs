//! Notes (docs/DESIGN.md §20): any operator leaves one on a workflow, a step or an incident; it
//! is an audit entry that changes no state, shows in the step's timeline, and finds its step in
//! the review queue's "has a note" filter.

use chrono::{Duration, Utc};
use destinations::Kind;
use engine::domain::Role;
use engine::read::queue::{QueueFilter, queue};
use engine::recovery::ActionError;
use engine::recovery::note::add_note;
use engine::store::note::NoteOn;
use sqlx::PgPool;
use uuid::Uuid;

use crate::operate::{person, reviewing, unknown_delivery};

async fn noted_steps(pool: &PgPool, since: chrono::DateTime<Utc>) -> Vec<Uuid> {
    let filter = QueueFilter {
        noted_since: Some(since),
        creation_key_prefix: None,
        ..QueueFilter::default()
    };
    queue(pool, &filter, None, 50)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.step_id)
        .collect()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_note_changes_nothing_and_shows_in_the_timeline_and_the_queue_filter(pool: PgPool) {
    let h = reviewing(pool, Kind::Opaque, 300, 0).await;
    let olga = person("olga", Role::Operator);
    let (w, step) = unknown_delivery(&h, "noted", "review_required").await;
    let (_, quiet) = unknown_delivery(&h, "quiet", "review_required").await;
    let before = engine::read::evidence::evidence(&h.pool, step)
        .await
        .unwrap()
        .unwrap();
    assert!(
        noted_steps(&h.pool, Utc::now() - Duration::days(1))
            .await
            .is_empty()
    );

    let note = add_note(
        &h.pool,
        &olga,
        NoteOn::Step(step),
        "asked the provider, ticket 4411",
    )
    .await
    .unwrap();
    assert_eq!((note.workflow, note.step), (w, Some(step)));
    add_note(&h.pool, &olga, NoteOn::Workflow(w), "customer called twice")
        .await
        .unwrap();

    let after = engine::read::evidence::evidence(&h.pool, step)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((after.state, after.version), (before.state, before.version));
    let lines: Vec<(String, String)> = after
        .timeline
        .iter()
        .filter(|t| t.what.starts_with("note"))
        .map(|t| (t.what.clone(), t.detail.clone()))
        .collect();
    assert_eq!(
        lines,
        [
            (
                "note by olga".to_owned(),
                "asked the provider, ticket 4411".to_owned()
            ),
            (
                "note on the workflow by olga".to_owned(),
                "customer called twice".to_owned()
            ),
        ]
    );
    let found = noted_steps(&h.pool, Utc::now() - Duration::hours(1)).await;
    assert_eq!(found, [step], "the quiet step {quiet} has no note");
    assert!(
        noted_steps(&h.pool, Utc::now() + Duration::hours(1))
            .await
            .is_empty()
    );
    let listed = engine::store::note::of_workflow(&h.pool, w).await.unwrap();
    assert_eq!(listed.len(), 2);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_viewer_writes_no_note_an_empty_one_is_refused_and_the_target_must_exist(pool: PgPool) {
    let h = reviewing(pool, Kind::Opaque, 300, 0).await;
    let (w, _) = unknown_delivery(&h, "refused-notes", "review_required").await;
    let viewer = add_note(
        &h.pool,
        &person("vic", Role::Viewer),
        NoteOn::Workflow(w),
        "hi",
    )
    .await;
    assert!(
        matches!(viewer, Err(ActionError::Forbidden(_))),
        "{viewer:?}"
    );
    let olga = person("olga", Role::Operator);
    let blank = add_note(&h.pool, &olga, NoteOn::Workflow(w), "   ").await;
    assert!(matches!(blank, Err(ActionError::Invalid(_))), "{blank:?}");
    let nowhere = add_note(&h.pool, &olga, NoteOn::Incident(Uuid::now_v7()), "hi").await;
    assert!(matches!(nowhere, Err(ActionError::NotFound)), "{nowhere:?}");
    let written: i64 = sqlx::query_scalar("select count(*) from audit where action = 'note'")
        .fetch_one(&h.pool)
        .await
        .unwrap();
    assert_eq!(written, 0);
}
