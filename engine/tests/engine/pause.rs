//! An operator's pause of a workflow (docs/DESIGN.md §20): no step of it starts, its ready
//! steps wait held and uncounted, a step in recovery is not resent, other workflows run on,
//! and resuming sends its held steps back — except those whose adapter is still held.

use std::time::Duration;

use destinations::Kind;
use engine::domain::Role;
use engine::recovery::ActionError;
use engine::recovery::hold::{hold_adapter, resume_adapter};
use engine::recovery::pause::{pause_workflow, pause_workflows, resume_workflow};
use engine::store::journal::Actor;
use sqlx::PgPool;
use uuid::Uuid;

use crate::operate::{person, unknown_delivery};
use crate::support::Harness;

/// The audit entries of `action` on `workflow`: actor, reason.
async fn audited(pool: &PgPool, action: &str, workflow: Uuid) -> Vec<(String, Option<String>)> {
    sqlx::query_as(
        "select actor, reason from audit where action = $1 and workflow_id = $2 order by id",
    )
    .bind(action)
    .bind(workflow)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_paused_workflow_starts_nothing_while_others_run_until_it_is_resumed(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let olga = person("olga", Role::Operator);
    let (paused, running) = (h.start("paused-1").await, h.start("running-1").await);
    let done = pause_workflow(&h.pool, &olga, paused, "customer asked us to wait")
        .await
        .unwrap();
    assert_eq!(done.steps, 1, "its ready step is held at once");
    assert_eq!(h.step(paused, "deliver").await, ("held".to_owned(), 0));

    h.drive_until(running, "deliver", "succeeded").await;
    h.drive_for(Duration::from_millis(300)).await;
    assert_eq!(
        h.step(paused, "deliver").await,
        ("held".to_owned(), 0),
        "held, no attempt"
    );
    assert_eq!(h.effects(&Harness::key(paused, "deliver")).await, 0);
    let status = engine::read::status::project(&h.pool, paused)
        .await
        .unwrap()
        .unwrap();
    let pause = status.paused.expect("the status names the pause");
    assert_eq!(
        (pause.paused_by.as_str(), pause.reason.as_str()),
        ("olga", "customer asked us to wait")
    );

    let resumed = resume_workflow(&h.pool, &olga, paused, "customer confirmed")
        .await
        .unwrap();
    assert_eq!(resumed.steps, 1);
    h.drive_until(paused, "deliver", "succeeded").await;
    assert_eq!(h.effects(&Harness::key(paused, "deliver")).await, 1);
    let on_record = [
        audited(&h.pool, "workflow_pause", paused).await,
        audited(&h.pool, "workflow_resume", paused).await,
    ];
    assert_eq!(
        on_record,
        [
            vec![(
                "olga".to_owned(),
                Some("customer asked us to wait".to_owned())
            )],
            vec![("olga".to_owned(), Some("customer confirmed".to_owned()))],
        ]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_in_recovery_is_not_resent_while_its_workflow_is_paused(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 300, 0).await;
    let olga = person("olga", Role::Operator);
    let (w, _) = unknown_delivery(&h, "paused-replay", "outcome_unknown").await;
    pause_workflow(&h.pool, &olga, w, "checking with the provider")
        .await
        .unwrap();
    sqlx::query("update step_ready set run_after = now()")
        .execute(&h.pool)
        .await
        .unwrap();
    h.drive_for(Duration::from_millis(400)).await;
    assert_eq!(
        h.step(w, "deliver").await,
        ("outcome_unknown".to_owned(), 1),
        "no resend while paused"
    );

    resume_workflow(&h.pool, &olga, w, "provider answered")
        .await
        .unwrap();
    sqlx::query("update step_ready set run_after = now()")
        .execute(&h.pool)
        .await
        .unwrap();
    h.drive_until(w, "deliver", "succeeded").await;
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_waits_until_both_its_workflow_and_its_adapter_are_released(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let olga = person("olga", Role::Operator);
    let ana = (Actor::Operator("ana"), Role::Approver);
    let w = h.start("both").await;
    pause_workflow(&h.pool, &olga, w, "customer asked us to wait")
        .await
        .unwrap();
    hold_adapter(&h.pool, ana, "docs", "provider outage", true)
        .await
        .unwrap();

    let adapter = resume_adapter(&h.pool, ana, "docs", "provider back", None)
        .await
        .unwrap();
    assert_eq!(adapter.released, 0, "the workflow is still paused");
    hold_adapter(&h.pool, ana, "docs", "provider down again", true)
        .await
        .unwrap();
    let workflow = resume_workflow(&h.pool, &olga, w, "customer confirmed")
        .await
        .unwrap();
    assert_eq!(workflow.steps, 0, "the adapter is still held");
    h.drive_for(Duration::from_millis(300)).await;
    assert_eq!(h.step(w, "deliver").await, ("held".to_owned(), 0));

    resume_adapter(&h.pool, ana, "docs", "provider back", None)
        .await
        .unwrap();
    h.drive_until(w, "deliver", "succeeded").await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn pausing_needs_an_operator_a_reason_and_a_workflow_left_to_run(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let olga = person("olga", Role::Operator);
    let w = h.start("refusals").await;

    let viewer = pause_workflow(&h.pool, &person("vic", Role::Viewer), w, "why not").await;
    assert!(
        matches!(viewer, Err(ActionError::Forbidden(_))),
        "{viewer:?}"
    );
    let blank = pause_workflow(&h.pool, &olga, w, " ").await;
    assert!(matches!(blank, Err(ActionError::Invalid(_))), "{blank:?}");
    let unknown = pause_workflow(&h.pool, &olga, Uuid::now_v7(), "wait").await;
    assert!(matches!(unknown, Err(ActionError::NotFound)), "{unknown:?}");
    let not_paused = resume_workflow(&h.pool, &olga, w, "go").await;
    assert!(
        matches!(not_paused, Err(ActionError::Conflict(_))),
        "{not_paused:?}"
    );

    pause_workflow(&h.pool, &olga, w, "wait").await.unwrap();
    let again = pause_workflow(&h.pool, &olga, w, "wait more").await;
    let Err(ActionError::Conflict(sentence)) = again else {
        panic!("a second pause was not refused: {again:?}");
    };
    assert!(sentence.contains("paused already, by olga"), "{sentence}");
    resume_workflow(&h.pool, &olga, w, "go").await.unwrap();
    for _ in 0..100 {
        if h.workflow_state(w).await == "completed" {
            break;
        }
        h.drive_for(Duration::from_millis(50)).await;
    }
    assert_eq!(h.workflow_state(w).await, "completed");
    let settled = pause_workflow(&h.pool, &olga, w, "too late").await;
    let Err(ActionError::Conflict(sentence)) = settled else {
        panic!("pausing a completed workflow was not refused: {settled:?}");
    };
    assert!(sentence.contains("completed"), "{sentence}");
    assert_eq!(audited(&h.pool, "workflow_pause", w).await.len(), 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_that_becomes_ready_while_its_workflow_is_paused_is_held_when_claimed(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("ready-later").await;
    // As a dependant made ready by a settling step finds it: paused, its step still queued.
    sqlx::query(
        "update workflow set paused_at = now(), paused_by = 'olga', paused_reason = 'wait'
         where id = $1",
    )
    .bind(w)
    .execute(&h.pool)
    .await
    .unwrap();
    h.drive_until(w, "deliver", "held").await;
    assert_eq!(h.step(w, "deliver").await, ("held".to_owned(), 0));
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 0);

    let olga = person("olga", Role::Operator);
    resume_workflow(&h.pool, &olga, w, "go").await.unwrap();
    h.drive_until(w, "deliver", "succeeded").await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_bulk_pause_pauses_each_listed_workflow_that_can_be_and_leaves_the_rest(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let olga = person("olga", Role::Operator);
    let done = h.start("bulk-3").await;
    h.drive_until(done, "notify", "succeeded").await;
    let (first, second) = (h.start("bulk-1").await, h.start("bulk-2").await);
    pause_workflow(&h.pool, &olga, second, "asked first")
        .await
        .unwrap();

    let viewer = person("vic", Role::Viewer);
    let refused = pause_workflows(&h.pool, &viewer, &[first], "outage").await;
    assert!(
        matches!(refused, Err(ActionError::Forbidden(_))),
        "{refused:?}"
    );
    let none = pause_workflows(&h.pool, &olga, &[], "outage").await;
    assert!(matches!(none, Err(ActionError::Invalid(_))), "{none:?}");

    let paused = pause_workflows(
        &h.pool,
        &olga,
        &[first, second, done, first],
        "the partner is down",
    )
    .await
    .unwrap();
    assert_eq!(paused.paused, [first], "only the one that could be");
    assert_eq!(paused.left, 2, "paused already, completed");
    for w in [first, second] {
        assert_eq!(h.step(w, "deliver").await.0, "held");
    }
    h.drive_for(Duration::from_millis(200)).await;
    assert_eq!(h.effects(&Harness::key(first, "deliver")).await, 0);
    let audit = audited(&h.pool, "workflow_pause", first).await;
    assert_eq!(
        audit,
        [("olga".to_owned(), Some("the partner is down".to_owned()))]
    );
}
