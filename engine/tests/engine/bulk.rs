//! Bulk recovery: the exact rows previewed, each judged by the decision table, and none that
//! changed since the preview.

use destinations::Kind;
use engine::domain::{BulkOutcome, OperatorAction, Role};
use engine::recovery::Action;
use sqlx::PgPool;
use uuid::Uuid;

use crate::operate::{act, enrolled, person, reviewing, unknown_delivery};
use crate::support::Harness;

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn bulk_recovery_acts_only_on_the_rows_shown_and_refuses_those_changed_since(pool: PgPool) {
    // A second's deadline: the bulk run's retries must not time out on a loaded machine.
    let h = reviewing(pool, Kind::Idempotent, 1_000, 0).await;
    let mut shown = Vec::new();
    for key in ["bulk-1", "bulk-2", "bulk-3"] {
        shown.push(unknown_delivery(&h, key, "review_required").await);
    }
    let alice = enrolled(&h.pool, "alice", Role::Operator).await;
    let filter = engine::read::queue::QueueFilter::default();
    let (rows, more) = engine::recovery::bulk::preview(
        &h.pool,
        &filter,
        OperatorAction::RetrySameKey,
        alice.role,
        100,
    )
    .await
    .unwrap();
    assert!(!more);
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.refusal.is_none()), "{rows:?}");
    // After the preview: one shown row is waived by someone else, and a new row arrives.
    act(
        &h,
        &person("carol", Role::Approver),
        shown[2].1,
        Action::Waive {
            residual_uncertainty: "unknown".into(),
        },
    )
    .await
    .unwrap();
    let (late, late_step) = unknown_delivery(&h, "bulk-late", "review_required").await;

    let pairs: Vec<(Uuid, i64)> = rows.iter().map(|r| (r.step_id, r.version)).collect();
    let run = engine::recovery::bulk::create(
        &h.pool,
        &engine::recovery::bulk::NewRun {
            operator: &alice,
            action: OperatorAction::RetrySameKey,
            reason: "the destination was down this morning",
            residual_uncertainty: None,
            rate_per_sec: 50,
            rows: &pairs,
        },
    )
    .await
    .unwrap();
    engine::recovery::bulk::run(&h.pool, run).await.unwrap();

    let progress = engine::recovery::bulk::progress(&h.pool, run)
        .await
        .unwrap()
        .unwrap();
    assert!(progress.finished_at.is_some());
    let outcome_of = |step: Uuid| {
        progress
            .items
            .iter()
            .find(|(s, ..)| *s == step)
            .and_then(|(_, _, o, _)| o.map(BulkOutcome::as_str))
    };
    assert_eq!(outcome_of(shown[0].1), Some("done"));
    assert_eq!(outcome_of(shown[1].1), Some("done"));
    assert_eq!(outcome_of(shown[2].1), Some("refused"));
    assert_eq!(
        outcome_of(late_step),
        None,
        "a row that arrived later was acted on"
    );
    for (w, _) in &shown[..2] {
        h.drive_until(*w, "deliver", "succeeded").await;
        assert_eq!(h.effects(&Harness::key(*w, "deliver")).await, 1);
    }
    assert_eq!(h.step(shown[2].0, "deliver").await.0, "waived");
    assert_eq!(h.step(late, "deliver").await.0, "review_required");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_bulk_preview_lists_the_rows_the_contract_refuses(pool: PgPool) {
    let h = Harness::new(pool, Kind::Opaque, 300, 0).await;
    unknown_delivery(&h, "bulk-opaque", "review_required").await;
    let (rows, _) = engine::recovery::bulk::preview(
        &h.pool,
        &engine::read::queue::QueueFilter::default(),
        OperatorAction::RetrySameKey,
        Role::Approver,
        100,
    )
    .await
    .unwrap();
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0]
            .refusal
            .as_deref()
            .is_some_and(|r| r.contains("not permitted")),
        "{rows:?}"
    );
    let refused = engine::recovery::bulk::create(
        &h.pool,
        &engine::recovery::bulk::NewRun {
            operator: &person("carol", Role::Approver),
            action: OperatorAction::AuthorizeAnotherAttempt,
            reason: "all of them",
            residual_uncertainty: None,
            rate_per_sec: 5,
            rows: &[(rows[0].step_id, rows[0].version)],
        },
    )
    .await;
    assert!(matches!(
        refused,
        Err(engine::recovery::bulk::BulkError::Invalid(_))
    ));
}

/// Creates a retry run over `rows` with `reason`, as `alice` the operator.
async fn create_run(
    pool: &PgPool,
    rows: &[(Uuid, i64)],
    reason: &str,
) -> Result<Uuid, engine::recovery::bulk::BulkError> {
    engine::recovery::bulk::create(
        pool,
        &engine::recovery::bulk::NewRun {
            operator: &person("alice", Role::Operator),
            action: OperatorAction::RetrySameKey,
            reason,
            residual_uncertainty: None,
            rate_per_sec: 5,
            rows,
        },
    )
    .await
}

async fn runs(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from bulk_run")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_bulk_reason_with_a_nul_or_beyond_its_length_is_refused_with_a_sentence(pool: PgPool) {
    let h = reviewing(pool, Kind::Idempotent, 300, 0).await;
    let (_, step) = unknown_delivery(&h, "bulk-text", "review_required").await;
    let rows = [(step, crate::operate::version(&h, step).await)];
    for (reason, sentence) in [
        ("the outage\0", "A reason contains a NUL character."),
        (
            &"x".repeat(2001)[..],
            "A reason is longer than 2000 characters.",
        ),
    ] {
        let refused = create_run(&h.pool, &rows, reason).await;
        assert!(
            matches!(&refused, Err(engine::recovery::bulk::BulkError::Invalid(s)) if s == sentence),
            "{refused:?}"
        );
    }
    assert_eq!(runs(&h.pool).await, 0);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn no_more_than_eight_bulk_runs_go_at_once(pool: PgPool) {
    let h = reviewing(pool, Kind::Idempotent, 300, 0).await;
    let (_, step) = unknown_delivery(&h, "bulk-many", "review_required").await;
    let rows = [(step, crate::operate::version(&h, step).await)];
    for _ in 0..engine::recovery::bulk::MAX_UNFINISHED_RUNS {
        create_run(&h.pool, &rows, "the outage").await.unwrap();
    }
    let refused = create_run(&h.pool, &rows, "the outage").await;
    assert!(
        matches!(&refused, Err(engine::recovery::bulk::BulkError::Invalid(s)) if s.contains("bulk runs are still going")),
        "{refused:?}"
    );
    assert_eq!(
        runs(&h.pool).await,
        i64::try_from(engine::recovery::bulk::MAX_UNFINISHED_RUNS).unwrap()
    );
}

/// Three steps in review, and a same-key retry run over them by `author` at one step a second.
async fn slow_run(h: &Harness, author: &engine::operators::Operator) -> (Uuid, Vec<Uuid>) {
    let mut steps = Vec::new();
    for key in ["slow-1", "slow-2", "slow-3"] {
        steps.push(unknown_delivery(h, key, "review_required").await.1);
    }
    let (rows, _) = engine::recovery::bulk::preview(
        &h.pool,
        &engine::read::queue::QueueFilter::default(),
        OperatorAction::RetrySameKey,
        author.role,
        100,
    )
    .await
    .unwrap();
    let pairs: Vec<(Uuid, i64)> = rows.iter().map(|r| (r.step_id, r.version)).collect();
    let run = engine::recovery::bulk::create(
        &h.pool,
        &engine::recovery::bulk::NewRun {
            operator: author,
            action: OperatorAction::RetrySameKey,
            reason: "the destination is back",
            residual_uncertainty: None,
            rate_per_sec: 1,
            rows: &pairs,
        },
    )
    .await
    .unwrap();
    (run, steps)
}

/// How many of run `run`'s items were performed, and how many refused.
async fn performed(pool: &PgPool, run: Uuid) -> (i64, i64) {
    sqlx::query_as(
        "select count(*) filter (where outcome = 'done'), count(*) filter (where outcome = 'refused')
         from bulk_item where run_id = $1",
    )
    .bind(run)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_bulk_run_stops_within_one_item_of_its_author_being_disabled(pool: PgPool) {
    let h = reviewing(pool, Kind::Idempotent, 300, 0).await;
    let alice = enrolled(&h.pool, "alice", Role::Operator).await;
    let (run, _) = slow_run(&h, &alice).await;
    let running = tokio::spawn({
        let pool = h.pool.clone();
        async move { engine::recovery::bulk::run(&pool, run).await }
    });
    while performed(&h.pool, run).await.0 == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    engine::operators::disable(
        &h.pool,
        "alice",
        engine::store::journal::Actor::Engine("test"),
    )
    .await
    .unwrap();
    running.await.unwrap().unwrap();

    let (done, refused) = performed(&h.pool, run).await;
    assert!(done <= 2, "{done} items were performed after the first");
    assert_eq!(done + refused, 3);
    let progress = engine::recovery::bulk::progress(&h.pool, run)
        .await
        .unwrap()
        .unwrap();
    let (by, reason) = progress.stopped.expect("the run records why it stopped");
    assert_eq!(by, "z29c");
    assert!(reason.contains("`alice` was disabled"), "{reason}");
    assert!(progress.finished_at.is_some());
    assert!(
        engine::recovery::bulk::resume_all(&h.pool).await.unwrap() == 0,
        "a stopped run is not resumed"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_bulk_run_stopped_by_an_approver_refuses_what_it_had_not_done_and_is_audited(
    pool: PgPool,
) {
    let h = reviewing(pool, Kind::Idempotent, 300, 0).await;
    let alice = enrolled(&h.pool, "alice", Role::Operator).await;
    let (run, _) = slow_run(&h, &alice).await;
    let bob = enrolled(&h.pool, "bob", Role::Operator).await;
    // A token named like the author is not the author.
    let alias = engine::operators::Operator {
        id: Uuid::now_v7(),
        username: "alice".into(),
        role: Role::Operator,
        via: engine::operators::Via::Token,
        adapters: None,
    };
    for stranger in [&bob, &alias] {
        let refused = engine::recovery::bulk::stop(&h.pool, run, stranger, "not yours").await;
        assert!(
            matches!(&refused, Err(engine::recovery::bulk::BulkError::Invalid(why)) if why.contains("author or an approver")),
            "{:?}: {refused:?}",
            stranger.via
        );
    }
    let carol = enrolled(&h.pool, "carol", Role::Approver).await;
    assert!(
        engine::recovery::bulk::stop(&h.pool, run, &carol, "the destination is down again")
            .await
            .unwrap()
    );
    engine::recovery::bulk::run(&h.pool, run).await.unwrap();
    assert_eq!(performed(&h.pool, run).await, (0, 3));
    let audited: (String, String) =
        sqlx::query_as("select actor, reason from audit where action = 'bulk_stop'")
            .fetch_one(&h.pool)
            .await
            .unwrap();
    assert_eq!(
        audited,
        ("carol".into(), "the destination is down again".into())
    );
    assert!(
        !engine::recovery::bulk::stop(&h.pool, run, &carol, "again")
            .await
            .unwrap(),
        "a finished run is not stopped twice"
    );
}
