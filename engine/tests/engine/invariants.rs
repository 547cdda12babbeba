//! The semantic invariants find what they are for, once each, and nothing on healthy runs.

use crate::support::{Harness, fixture};
use destinations::Kind;
use engine::watch::invariants::Resume;
use sqlx::PgPool;
use uuid::Uuid;

async fn step_id(pool: &PgPool, workflow: Uuid, logical: &str) -> Uuid {
    sqlx::query_scalar("select id from step where workflow_id = $1 and logical = $2")
        .bind(workflow)
        .bind(logical)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn kinds(violations: &[engine::watch::invariants::Violation]) -> Vec<&str> {
    violations.iter().map(|v| v.kind.as_str()).collect()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_healthy_run_violates_nothing(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("healthy").await;
    h.drive_until(w, "notify", "succeeded").await;
    assert_eq!(
        engine::watch::invariants::check(&pool).await.unwrap(),
        vec![]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_retry_under_an_opaque_adapter_without_authorization_is_found_and_recorded_once(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 2_000, 0).await;
    let w = h.start("rogue-retry").await;
    let deliver = fixture::Step::of(&pool, step_id(&pool, w, "deliver").await);
    deliver.rogue_attempt(1, "outcome_unknown").await;
    deliver.rogue_attempt(2, "succeeded").await;

    let found = engine::watch::invariants::check(&pool).await.unwrap();
    assert!(
        kinds(&found).contains(&"opaque_retry_without_authorization"),
        "{found:?}"
    );
    engine::watch::invariants::check(&pool).await.unwrap();
    let recorded: i64 = sqlx::query_scalar(
        "select count(*) from invariant_violation where kind = 'opaque_retry_without_authorization'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(recorded, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_with_two_external_references_is_found(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("two-refs").await;
    h.drive_until(w, "deliver", "succeeded").await;
    let deliver = step_id(&pool, w, "deliver").await;
    let mut tx = pool.begin().await.unwrap();
    engine::store::incident::open_duplicate_incident(&mut tx, deliver, &[("x-999", None)])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let found = engine::watch::invariants::check(&pool).await.unwrap();
    assert_eq!(
        kinds(&found),
        vec!["one_effect_step_with_several_references"]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn check_fails_only_for_a_violation_no_incident_records(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 2_000, 0).await;
    let w = h.start("unseen-then-seen").await;
    let id = step_id(&pool, w, "deliver").await;
    let deliver = fixture::Step::of(&pool, id);
    deliver.rogue_attempt(1, "outcome_unknown").await;
    deliver.rogue_attempt(2, "succeeded").await;
    let found = engine::watch::invariants::check(&pool).await.unwrap();
    assert!(!found.is_empty());
    let seen = engine::watch::invariants::seen(&pool, &found)
        .await
        .unwrap();
    assert_eq!(seen, vec![], "nobody has seen the rogue retry yet");

    let mut tx = pool.begin().await.unwrap();
    engine::store::incident::open_duplicate_incident(&mut tx, id, &[("x-1", None)])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let found = engine::watch::invariants::check(&pool).await.unwrap();
    let seen = engine::watch::invariants::seen(&pool, &found)
        .await
        .unwrap();
    assert_eq!(
        seen, found,
        "an incident records every violation of its step"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_dependant_started_before_its_required_receipt_is_found(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("early-notify").await;
    let notify = fixture::Step::of(&pool, step_id(&pool, w, "notify").await);
    notify.rogue_attempt(1, "succeeded").await;
    let found = engine::watch::invariants::check(&pool).await.unwrap();
    assert!(
        kinds(&found).contains(&"dependant_started_before_required_receipt"),
        "{found:?}"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_dependant_whose_attempt_began_before_its_dependencys_receipt_was_written_is_found(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let early = h.start("began-early").await;
    let after = h.start("began-after").await;
    for w in [early, after] {
        h.drive_until(w, "deliver", "succeeded").await;
    }
    // A notify attempt dated a second before, or after, the delivery's receipt.
    for (w, offset) in [(early, "-1 second"), (after, "1 second")] {
        sqlx::query(
            "insert into attempt_start (id, step_id, number, worker, started_at)
             select $1, n.id, n.attempt_count + 1, 'rogue', r.created_at + $2::interval
             from step n join step d on d.workflow_id = n.workflow_id and d.logical = 'deliver'
             join receipt r on r.step_id = d.id
             where n.workflow_id = $3 and n.logical = 'notify'",
        )
        .bind(Uuid::now_v7())
        .bind(offset)
        .bind(w)
        .execute(&pool)
        .await
        .unwrap();
    }
    let found = engine::watch::invariants::check(&pool).await.unwrap();
    let started_early: Vec<&str> = found
        .iter()
        .filter(|v| v.kind == "dependant_started_before_required_receipt")
        .map(|v| v.subject.as_str())
        .collect();
    assert_eq!(
        started_early,
        vec![step_id(&pool, early, "notify").await.to_string()],
        "{found:?}"
    );
}

/// The periodic check as a worker with interval `every_secs` runs it.
async fn due(pool: &PgPool, every_secs: u64) -> Option<Vec<engine::watch::invariants::Violation>> {
    let every = std::time::Duration::from_secs(every_secs);
    engine::watch::invariants::check_if_due(pool, every)
        .await
        .unwrap()
}

/// Moves the start of the last periodic pass `started_secs_ago` into the past and, when given,
/// says how long it took.
async fn last_pass(pool: &PgPool, started_secs_ago: f64, took_secs: Option<f64>) {
    sqlx::query(
        "update invariant_turn set checked_at = now() - make_interval(secs => $1),
                                   pass_secs = coalesce($2, pass_secs)",
    )
    .bind(started_secs_ago)
    .bind(took_secs)
    .execute(pool)
    .await
    .unwrap();
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_periodic_check_runs_once_per_interval_however_many_workers_share_the_database(
    pool: PgPool,
) {
    assert_eq!(
        due(&pool, 3_600).await,
        Some(vec![]),
        "nobody had checked yet"
    );
    assert_eq!(
        due(&pool, 3_600).await,
        None,
        "a second worker checked again"
    );
    last_pass(&pool, 3_601.0, Some(0.01)).await;
    assert_eq!(
        due(&pool, 3_600).await,
        Some(vec![]),
        "an interval passed and nobody checked"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_long_pass_spaces_the_next_one_out_to_ten_times_its_length(pool: PgPool) {
    due(&pool, 30).await.expect("the first turn is free");
    // As at 1M workflows: a pass of 90 s; the next may start 900 s after it did, not 30.
    last_pass(&pool, 600.0, Some(90.0)).await;
    assert_eq!(due(&pool, 30).await, None, "checked again after 600 s");
    last_pass(&pool, 901.0, Some(90.0)).await;
    assert_eq!(
        due(&pool, 30).await,
        Some(vec![]),
        "not checked after 901 s"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_pass_still_running_is_not_started_again_beside_itself(pool: PgPool) {
    due(&pool, 30).await.expect("the first turn is free");
    last_pass(&pool, 3_600.0, Some(90.0)).await;
    // A worker takes the turn and is still reading when the interval has passed for another.
    assert!(
        engine::store::invariant::take_check_turn(&pool, 30.0, 10.0)
            .await
            .unwrap()
    );
    last_pass(&pool, 100.0, None).await;
    assert_eq!(
        due(&pool, 30).await,
        None,
        "a second pass began 100 s into one that takes 90 s or more"
    );
    // A pass cut short holds the turn for ten times the length it was expected to take.
    last_pass(&pool, 901.0, None).await;
    assert!(due(&pool, 30).await.is_some(), "the turn stayed held");
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_periodic_check_reports_a_violation_once_while_check_shows_it_as_long_as_it_holds(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 2_000, 0).await;
    let w = h.start("reported-once").await;
    let deliver = fixture::Step::of(&pool, step_id(&pool, w, "deliver").await);
    deliver.rogue_attempt(1, "outcome_unknown").await;
    deliver.rogue_attempt(2, "succeeded").await;
    let first = due(&pool, 0).await.expect("the first turn is free");
    assert!(
        kinds(&first).contains(&"opaque_retry_without_authorization"),
        "{first:?}"
    );
    last_pass(&pool, 60.0, Some(0.01)).await;
    assert_eq!(
        due(&pool, 0).await,
        Some(vec![]),
        "the next pass reported it again"
    );
    let holding = engine::watch::invariants::check(&pool).await.unwrap();
    assert_eq!(
        kinds(&holding),
        kinds(&first),
        "z29c check stopped showing it"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn before_resume_every_step_caught_mid_call_goes_to_recovery(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 2_000, 0).await;
    let w = h.start("restored").await;
    h.drive_until(w, "deliver", "ready").await;
    // As a restore would leave it: invoking, an open attempt, a lease that has not expired.
    fixture::Step::of(&pool, step_id(&pool, w, "deliver").await)
        .caught_invoking(&Harness::key(w, "deliver"), "gone")
        .await;

    assert_eq!(
        engine::watch::invariants::prepare_resume(&pool)
            .await
            .unwrap(),
        Resume {
            to_recovery: 1,
            marked: 1,
            to_ready: 0,
            rebased_events: 0
        }
    );
    assert_eq!(h.outcomes(w, "deliver").await, vec!["outcome_unknown"]);
    h.drive_until(w, "deliver", "review_required").await;
    assert_eq!(
        h.ledger().await.deliveries.len(),
        0,
        "recovery sent the request again"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_step_restored_mid_attempt_is_recovered_by_contract_never_rerun_blindly(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let w = h.start("restored-running").await;
    h.drive_until(w, "deliver", "ready").await;
    // As the backup saw it: leased, an attempt open, no request identity persisted yet.
    fixture::Step::of(&pool, step_id(&pool, w, "deliver").await)
        .caught_running("gone")
        .await;

    assert_eq!(
        engine::watch::invariants::prepare_resume(&pool)
            .await
            .unwrap(),
        Resume {
            to_recovery: 1,
            marked: 1,
            to_ready: 0,
            rebased_events: 0
        }
    );
    assert_eq!(h.outcomes(w, "deliver").await, vec!["outcome_unknown"]);
    h.drive_until(w, "deliver", "succeeded").await;
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn after_a_restore_an_opaque_step_the_backup_saw_ready_or_waiting_is_never_sent_blind(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Opaque, 2_000, 0).await;
    let w = h.start("restored-ready").await;
    // As the backup saw it: deliver ready, notify waiting for it. The live system may have sent
    // both since.
    h.drive_until(w, "deliver", "ready").await;

    assert_eq!(
        engine::watch::invariants::prepare_resume(&pool)
            .await
            .unwrap(),
        Resume {
            to_recovery: 1,
            marked: 1,
            to_ready: 0,
            rebased_events: 0
        }
    );
    h.drive_until(w, "deliver", "review_required").await;
    assert!(
        h.ledger().await.deliveries.is_empty(),
        "a request the live system may have sent went out again"
    );

    // Notify waits for deliver, marked to start as outcome unknown once released.
    let restored: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("select restored_at from step where id = $1")
            .bind(step_id(&pool, w, "notify").await)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(restored.is_some());
    assert_eq!(h.step(w, "notify").await.0, "blocked");

    // The operator finds the delivery the live system made and attaches it: the receipt names
    // the request regenerated exactly as it was sent. Notify, released, starts as outcome
    // unknown, and an opaque adapter can only ask a person.
    let approver = crate::operate::person("restore-test", engine::domain::Role::Approver);
    let deliver = step_id(&pool, w, "deliver").await;
    engine::recovery::perform(
        &pool,
        engine::recovery::Request {
            operator: &approver,
            step: deliver,
            seen_version: None,
            reason: "found in the destination's console after the restore",
            action: engine::recovery::Action::AttachEvidence {
                external_reference: "dlv-live".into(),
                evidence: "the destination's console lists it".into(),
            },
        },
    )
    .await
    .unwrap();
    assert_eq!(
        h.receipt(w, "deliver").await.unwrap(),
        ("manual_evidence".to_owned(), "dlv-live".to_owned())
    );
    assert_eq!(h.step(w, "notify").await.0, "outcome_unknown");
    h.drive_until(w, "notify", "review_required").await;
    assert!(h.ledger().await.deliveries.is_empty());
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn after_a_restore_a_queryable_step_is_asked_about_first_and_sent_once_when_absent(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Queryable, 2_000, 100).await;
    let w = h.start("restored-queryable").await;
    h.drive_until(w, "deliver", "ready").await;
    engine::watch::invariants::prepare_resume(&pool)
        .await
        .unwrap();

    // Nothing was sent after this backup: each lookup finds nothing once the window has passed,
    // and only then does the step go out, once.
    h.drive_until(w, "notify", "succeeded").await;
    for logical in ["deliver", "notify"] {
        let asked_first: Option<bool> = sqlx::query_scalar(
            "select (select min(observed_at) from observation where step_id = s.id and kind = 'lookup')
                  < (select min(invoked_at) from attempt where step_id = s.id)
             from step s where s.workflow_id = $1 and s.logical = $2",
        )
        .bind(w)
        .bind(logical)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(
            asked_first,
            Some(true),
            "{logical} was sent before anyone asked about it"
        );
    }
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
    assert_eq!(h.effects(&Harness::key(w, "notify")).await, 1);
    assert!(
        engine::watch::invariants::check(&pool)
            .await
            .unwrap()
            .is_empty()
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn after_a_restore_a_delivery_the_live_system_made_is_found_by_lookup_and_receipted(
    pool: PgPool,
) {
    let h = Harness::new(pool.clone(), Kind::Queryable, 2_000, 100).await;
    let w = h.start("sent-after-backup").await;
    h.drive_until(w, "deliver", "succeeded").await;
    // Z29C rewound to a backup taken while deliver was ready: no attempt, no request identity,
    // no receipt. The destination keeps the delivery.
    fixture::Step::of(&pool, step_id(&pool, w, "deliver").await)
        .rewound_to_ready()
        .await;

    engine::watch::invariants::prepare_resume(&pool)
        .await
        .unwrap();
    h.drive_until(w, "notify", "succeeded").await;

    assert_eq!(h.receipt(w, "deliver").await.unwrap().0, "status_query");
    assert_eq!(h.effects(&Harness::key(w, "deliver")).await, 1);
    assert_eq!(h.effects(&Harness::key(w, "notify")).await, 1);
    assert!(
        engine::watch::invariants::check(&pool)
            .await
            .unwrap()
            .is_empty()
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_open_incidents_list_names_each_ones_workflow_and_references(pool: PgPool) {
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let mut opened = Vec::new();
    for key in ["listed-1", "listed-2"] {
        let w = h.start(key).await;
        h.drive_until(w, "deliver", "succeeded").await;
        let deliver = step_id(&pool, w, "deliver").await;
        let mut tx = pool.begin().await.unwrap();
        let reference = format!("x-{key}");
        engine::store::incident::open_duplicate_incident(&mut tx, deliver, &[(&reference, None)])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        opened.push((w, deliver, reference));
    }
    let listed = engine::read::queue::open_incidents(&pool, 50, None, None)
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    for ((w, deliver, reference), row) in opened.iter().zip(&listed) {
        assert_eq!((row.workflow_id, row.step_id), (*w, *deliver));
        assert!(row.references.contains(reference), "{:?}", row.references);
    }
    assert_eq!(listed[0].creation_key, "listed-1", "oldest first");
    let mine = engine::read::queue::open_incidents(&pool, 50, Some("listed-2"), None)
        .await
        .unwrap();
    assert_eq!(mine.len(), 1, "a prefix sees its own workflows' incidents");
    let first = engine::read::queue::open_incidents(&pool, 1, None, None)
        .await
        .unwrap();
    assert_eq!(
        first[0].step_id, opened[0].1,
        "at most the limit, oldest first"
    );
    let after = Some((first[0].opened_at, first[0].incident_id));
    let rest = engine::read::queue::open_incidents(&pool, 50, None, after)
        .await
        .unwrap();
    let rest: Vec<_> = rest.iter().map(|r| r.step_id).collect();
    assert_eq!(rest, [opened[1].1], "the next page starts after the cursor");
    let count = |prefix| engine::read::queue::open_incident_count(&pool, prefix);
    assert_eq!(count(None).await.unwrap(), 2);
    assert_eq!(count(Some("listed-2")).await.unwrap(), 1);
}
