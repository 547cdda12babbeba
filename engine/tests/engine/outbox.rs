//! The outbox and its consumers: at-least-once publication, idempotent consumers, revision
//! gaps repaired from durable state, projections rebuilt after being dropped, counters that
//! match what happened, alerts that reach a webhook once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::{Harness, events};
use destinations::{Fault, FaultPlan, FaultRule, Kind, Match, Operation};
use engine::adapter::BoxFuture;
use engine::domain::EventKind;
use engine::outbox::consumer::{Consumer, Event};
use engine::outbox::projections::{MetricsProjection, NotificationCandidates, StatusProjection};
use engine::outbox::publisher::{Pass, Publisher};
use engine::store::outbox::Position;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

async fn publish_all(publisher: &Publisher) {
    publisher.drain().await.unwrap();
}

/// Hands `event` to `consumer` once more through its cursor; whether it was new to it.
async fn redeliver(pool: &PgPool, consumer: &dyn Consumer, event: &Event) -> bool {
    let mut tx = pool.begin().await.unwrap();
    let fresh = engine::outbox::consumer::take(&mut tx, consumer, event, Position::default())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    fresh
}

/// Applies `event` in the status projection as it is, past any cursor: what a batch does
/// with a workflow's events that arrive out of revision order.
async fn project(pool: &PgPool, event: &Event) {
    let mut tx = pool.begin().await.unwrap();
    StatusProjection.handle(&mut tx, event).await.unwrap();
    tx.commit().await.unwrap();
}

/// Everything the consumers wrote, as text, for before/after comparisons.
async fn projections(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "select 'status ' || workflow_id || ' ' || revision || ' ' || sentence from status_projection
         union all select 'counter ' || name || labels || ' ' || value from metric_counter
         union all select 'candidate ' || workflow_id || ' ' || revision || ' ' || sentence from notification_candidate
         order by 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn counter(pool: &PgPool, name: &str, labels: &str) -> i64 {
    sqlx::query_scalar("select coalesce(sum(value), 0)::bigint from metric_counter where name = $1 and labels = $2")
        .bind(name)
        .bind(labels)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// A happy workflow and one whose dropped response is recovered by idempotent replay.
async fn scripted(h: &Harness) -> (Uuid, Uuid) {
    let happy = h.start("happy").await;
    h.drive_until(happy, "notify", "succeeded").await;
    let replayed = h.start("replayed").await;
    h.faults(FaultPlan::rules([FaultRule::new(
        Operation::Deliver,
        Match::ClientReference(Harness::key(replayed, "deliver")),
        Fault::DropResponse {},
    )
    .times(1)]));
    h.drive_until(replayed, "notify", "succeeded").await;
    (happy, replayed)
}

/// [`scripted`], then everything published to every consumer.
async fn scripted_and_published(h: &Harness) {
    scripted(h).await;
    publish_all(&Publisher::new(
        h.pool.clone(),
        engine::outbox::consumers(None),
    ))
    .await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_metrics_projection_counts_a_scripted_scenario_exactly(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    scripted_and_published(&h).await;

    let deliver = |outcome: &str| {
        format!(r#"[["adapter","docs"],["logical","deliver"],["outcome","{outcome}"]]"#)
    };
    assert_eq!(
        counter(&h.pool, "z29c_attempts_total", &deliver("succeeded")).await,
        2
    );
    assert_eq!(
        counter(&h.pool, "z29c_attempts_total", &deliver("outcome_unknown")).await,
        1
    );
    assert_eq!(
        counter(
            &h.pool,
            "z29c_recovery_path_total",
            r#"[["path","replay"]]"#
        )
        .await,
        1
    );
    assert_eq!(
        counter(
            &h.pool,
            "z29c_workflow_transitions_total",
            r#"[["to","completed"]]"#
        )
        .await,
        2
    );
    let figures = engine::watch::telemetry::figures(&h.pool).await.unwrap();
    assert!(
        figures
            .gauges
            .iter()
            .any(|(n, _, v)| n == "z29c_outbox_unpublished" && *v == 0.0)
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_repeated_event_changes_no_consumer(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let (happy, replayed) = scripted(&h).await;
    let publisher = Publisher::new(h.pool.clone(), engine::outbox::consumers(None));
    publish_all(&publisher).await;
    let before = projections(&h.pool).await;
    assert!(
        before.iter().any(|p| p.starts_with("status ")),
        "{before:?}"
    );

    let consumers: [&dyn Consumer; 3] = [
        &StatusProjection,
        &MetricsProjection,
        &NotificationCandidates,
    ];
    for workflow in [happy, replayed] {
        for event in events(&h.pool, workflow).await {
            for consumer in consumers {
                assert!(
                    !redeliver(&h.pool, consumer, &event).await,
                    "{} took {} twice",
                    consumer.name(),
                    event.kind
                );
            }
        }
    }
    assert_eq!(projections(&h.pool).await, before);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_revision_gap_is_repaired_from_durable_state_and_a_late_event_is_ignored(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let w = h.start("gap").await;
    // The projection has lost the workflow's row (dropped before a rebuild, say): admission
    // made one, and no flush keeps a row that is not there...
    sqlx::query("delete from status_projection where workflow_id = $1")
        .bind(w)
        .execute(&h.pool)
        .await
        .unwrap();
    h.drive_until(w, "notify", "succeeded").await;
    let all = events(&h.pool, w).await;
    assert!(all.len() >= 4, "{all:?}");

    // ...then the consumer takes the last event: everything before it is missing.
    project(&h.pool, all.last().unwrap()).await;
    let (revision, sentence): (i64, String) =
        sqlx::query_as("select revision, sentence from status_projection where workflow_id = $1")
            .bind(w)
            .fetch_one(&h.pool)
            .await
            .unwrap();
    let truth = engine::read::status::project(&h.pool, w)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (revision, sentence.as_str()),
        (truth.revision, truth.status.as_str())
    );
    assert_eq!(
        counter(
            &h.pool,
            "z29c_projection_repairs_total",
            r#"[["consumer","status"]]"#
        )
        .await,
        1
    );

    // A missing event arriving now is older than what the projection reflects: no change.
    let before = projections(&h.pool).await;
    project(&h.pool, &all[1]).await;
    assert_eq!(projections(&h.pool).await, before);
}

/// `workflow`'s notification candidates: (revision, state), oldest first.
async fn candidates(pool: &PgPool, workflow: Uuid) -> Vec<(i64, String)> {
    sqlx::query_as(
        "select revision, state::text from notification_candidate where workflow_id = $1
         order by revision",
    )
    .bind(workflow)
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Hands `event` to the notification consumer as it is, past any cursor.
async fn notify_of(pool: &PgPool, event: &Event) {
    let mut tx = pool.begin().await.unwrap();
    NotificationCandidates.handle(&mut tx, event).await.unwrap();
    tx.commit().await.unwrap();
}

/// A completed workflow, published, with its one candidate and the event that recorded it.
async fn told_completed(h: &Harness) -> (Uuid, Event) {
    let w = h.start("told").await;
    h.drive_until(w, "notify", "succeeded").await;
    publish_all(&Publisher::new(
        h.pool.clone(),
        engine::outbox::consumers(None),
    ))
    .await;
    let completed = events(&h.pool, w)
        .await
        .into_iter()
        .find(|e| e.kind == "workflow.state_changed" && e.payload["to"] == "completed")
        .expect("a completed workflow announced it");
    assert_eq!(
        candidates(&h.pool, w).await,
        [(completed.revision.unwrap(), "completed".to_owned())]
    );
    (w, completed)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_state_change_arriving_after_a_newer_one_records_no_second_notification(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let (w, completed) = told_completed(&h).await;
    let earlier = Event {
        event_id: Uuid::now_v7(),
        revision: completed.revision.map(|r| r - 1),
        ..completed.clone()
    };
    notify_of(&h.pool, &earlier).await;
    notify_of(&h.pool, &completed).await;
    assert_eq!(
        candidates(&h.pool, w).await,
        [(completed.revision.unwrap(), "completed".to_owned())]
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_state_change_the_workflow_has_since_left_records_no_notification(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    let (w, completed) = told_completed(&h).await;
    let to_review = Event {
        event_id: Uuid::now_v7(),
        revision: completed.revision.map(|r| r + 5),
        payload: serde_json::json!({ "from": "running", "to": "needs_review" }),
        ..completed.clone()
    };
    notify_of(&h.pool, &to_review).await;
    assert_eq!(
        candidates(&h.pool, w).await,
        [(completed.revision.unwrap(), "completed".to_owned())]
    );
}

/// Fails the first delivery it is given, as a publisher dying mid-batch would.
struct Crashing {
    calls: AtomicUsize,
}

impl Consumer for Crashing {
    fn name(&self) -> &'static str {
        "crashing"
    }

    fn handle<'a>(
        &'a self,
        _: &'a mut PgConnection,
        _: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
                Err(sqlx::Error::Protocol("the publisher died here".into()))
            } else {
                Ok(())
            }
        })
    }
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_publisher_that_dies_before_marking_its_batch_loses_nothing_and_doubles_nothing(
    pool: PgPool,
) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    scripted(&h).await;
    // The projections took the first event, then the publisher died before marking anything.
    let dying = Publisher::new(
        h.pool.clone(),
        vec![
            Box::new(StatusProjection),
            Box::new(MetricsProjection),
            Box::new(NotificationCandidates),
            Box::new(Crashing {
                calls: AtomicUsize::new(0),
            }),
        ],
    );
    // A transaction of another test on the cluster can hold the horizon back for a moment: the
    // batch is handed over, and the publisher dies, once its events are final.
    let mut died = false;
    for _ in 0..250 {
        match dying.publish_once().await {
            Err(_) => {
                died = true;
                break;
            }
            Ok(pass) => {
                assert_eq!(pass.published, 0, "published past a consumer that failed");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
    assert!(died, "the batch was never handed over");
    let unpublished = engine::read::metrics::outbox_backlog(&h.pool)
        .await
        .unwrap();
    assert!(unpublished > 0);

    publish_all(&Publisher::new(
        h.pool.clone(),
        engine::outbox::consumers(None),
    ))
    .await;
    let after_crash = projections(&h.pool).await;
    // The same history published by a publisher that never died.
    engine::outbox::projections::rebuild(&h.pool).await.unwrap();
    assert_eq!(projections(&h.pool).await, after_crash);
    assert_eq!(
        counter(
            &h.pool,
            "z29c_recovery_path_total",
            r#"[["path","replay"]]"#
        )
        .await,
        1
    );
}

/// Remembers the events it is handed, in order.
struct Recording {
    seen: Arc<std::sync::Mutex<Vec<Uuid>>>,
}

impl Consumer for Recording {
    fn name(&self) -> &'static str {
        "recording"
    }

    fn handle<'a>(
        &'a self,
        _: &'a mut PgConnection,
        event: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        self.seen.lock().unwrap().push(event.event_id);
        Box::pin(async { Ok(()) })
    }
}

/// A publisher whose one consumer records what it is handed, and that record.
fn recording_publisher(pool: &PgPool) -> (Publisher, Arc<std::sync::Mutex<Vec<Uuid>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let publisher = Publisher::new(
        pool.clone(),
        vec![Box::new(Recording { seen: seen.clone() })],
    );
    (publisher, seen)
}

/// Writes an `alert.opened` event for `rule` on `conn` (in its transaction, if it has one).
async fn alert(conn: &mut PgConnection, rule: &str) -> Uuid {
    let payload = serde_json::json!({ "rule": rule });
    engine::store::journal::emit_global(conn, EventKind::AlertOpened, &payload)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_event_committed_after_a_newer_transactions_event_is_still_delivered_and_first(
    pool: PgPool,
) {
    let (publisher, seen) = recording_publisher(&pool);
    let mut older = pool.begin().await.unwrap();
    let first = alert(&mut older, "older").await;
    let mut newer = pool.begin().await.unwrap();
    let second = alert(&mut newer, "newer").await;
    newer.commit().await.unwrap();

    // The newer event is committed, but an event before it may still appear: it waits.
    assert_eq!(
        publisher.publish_once().await.unwrap(),
        Pass {
            published: 0,
            held_back: true,
            busy: false,
        }
    );
    assert!(seen.lock().unwrap().is_empty());

    older.commit().await.unwrap();
    assert_eq!(publisher.drain().await.unwrap(), 2);
    assert_eq!(*seen.lock().unwrap(), [first, second]);
    assert_eq!(publisher.drain().await.unwrap(), 0, "delivered twice");
    assert_eq!(
        engine::read::metrics::outbox_backlog(&pool).await.unwrap(),
        0
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn draining_waits_out_another_publishers_turn(pool: PgPool) {
    let (publisher, seen) = recording_publisher(&pool);
    let event = alert(&mut pool.acquire().await.unwrap(), "written").await;
    // Another process's publisher holds the turn.
    let mut other = pool.acquire().await.unwrap();
    assert!(
        engine::store::outbox::try_lock_publisher(&mut other)
            .await
            .unwrap()
    );
    assert_eq!(
        publisher.publish_once().await.unwrap(),
        Pass {
            published: 0,
            held_back: false,
            busy: true,
        }
    );

    let draining = tokio::spawn({
        let publisher = publisher.clone();
        async move { publisher.drain().await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        !draining.is_finished(),
        "drained while another publisher held the turn"
    );
    engine::store::outbox::unlock_publisher(&mut other)
        .await
        .unwrap();

    assert_eq!(draining.await.unwrap().unwrap(), 1);
    assert_eq!(*seen.lock().unwrap(), [event]);
}

/// Writes a global event as a restored dump from another cluster would hold it: at `txid`.
async fn event_at(pool: &PgPool, txid: i64, rule: &str) -> (Uuid, Position) {
    let event_id = Uuid::now_v7();
    let id: i64 = sqlx::query_scalar(
        "insert into outbox (event_id, kind, payload, txid) values ($1, 'alert.opened', $2, $3)
         returning id",
    )
    .bind(event_id)
    .bind(serde_json::json!({ "rule": rule }))
    .bind(txid)
    .fetch_one(pool)
    .await
    .unwrap();
    (event_id, Position { txid, id })
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn outbox_positions_restored_from_a_cluster_further_along_are_re_based_before_resuming(
    pool: PgPool,
) {
    let (publisher, seen) = recording_publisher(&pool);
    let local = alert(&mut pool.acquire().await.unwrap(), "local").await;
    assert_eq!(publisher.drain().await.unwrap(), 1);

    // The dump came from a cluster a million transactions further along: every reader had
    // taken its first event there, not its second.
    let far: i64 = sqlx::query_scalar("select pg_current_xact_id()::text::bigint + 1000000")
        .fetch_one(&pool)
        .await
        .unwrap();
    let (_, taken) = event_at(&pool, far, "taken there").await;
    let (pending, _) = event_at(&pool, far + 7, "pending there").await;
    let mut conn = pool.acquire().await.unwrap();
    for reader in ["publisher", "recording"] {
        engine::store::outbox::advance_cursor(&mut conn, reader, taken)
            .await
            .unwrap();
    }
    drop(conn);

    let resume = engine::watch::invariants::prepare_resume(&pool)
        .await
        .unwrap();
    assert_eq!(resume.rebased_events, 3);
    let new = alert(&mut pool.acquire().await.unwrap(), "new").await;

    // Left ahead of the counter, the restored events would be held back for ever.
    let drained = tokio::time::timeout(std::time::Duration::from_secs(10), publisher.drain())
        .await
        .expect("the publisher waits for events ahead of every transaction id");
    assert_eq!(drained.unwrap(), 2);
    assert_eq!(*seen.lock().unwrap(), [local, pending, new]);
    assert_eq!(
        engine::read::metrics::outbox_backlog(&pool).await.unwrap(),
        0
    );
    assert!(
        sqlx::query("update outbox set kind = kind")
            .execute(&pool)
            .await
            .is_err(),
        "the outbox is append-only again"
    );
    assert_eq!(
        engine::watch::invariants::prepare_resume(&pool)
            .await
            .unwrap()
            .rebased_events,
        0,
        "positions already below the counter moved again"
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn every_projection_is_rebuilt_from_durable_state_after_being_dropped(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    scripted_and_published(&h).await;
    let before = projections(&h.pool).await;
    sqlx::raw_sql("delete from status_projection; delete from metric_counter")
        .execute(&h.pool)
        .await
        .unwrap();

    engine::outbox::projections::rebuild(&h.pool).await.unwrap();
    assert_eq!(projections(&h.pool).await, before);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_rebuild_waits_for_a_metrics_batch_in_flight_and_counts_it_once(pool: PgPool) {
    let h = Harness::new(pool, Kind::Idempotent, 2_000, 0).await;
    scripted_and_published(&h).await;
    let later = h.start("later").await;
    h.drive_until(later, "notify", "succeeded").await;
    // The metrics consumer has taken the later workflow's events and not committed yet.
    let start = engine::store::outbox::cursor(
        &mut h.pool.acquire().await.unwrap(),
        MetricsProjection.name(),
    )
    .await
    .unwrap();
    let mut in_flight = h.pool.begin().await.unwrap();
    let taken = engine::outbox::consumer::take_all(
        &mut in_flight,
        &MetricsProjection,
        &events(&h.pool, later).await,
        start,
    )
    .await
    .unwrap();
    assert!(taken > 0);

    let rebuilding = {
        let pool = h.pool.clone();
        tokio::spawn(async move { engine::outbox::projections::rebuild(&pool).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !rebuilding.is_finished(),
        "the rebuild did not meet the batch in flight"
    );
    in_flight.commit().await.unwrap();
    rebuilding.await.unwrap().unwrap();
    let completed = r#"[["to","completed"]]"#;
    assert_eq!(
        counter(&h.pool, "z29c_workflow_transitions_total", completed).await,
        3,
        "the batch in flight was lost or counted twice"
    );
    let after_race = projections(&h.pool).await;
    // The same history rebuilt with nothing in flight: the batch counted once, not lost.
    engine::outbox::projections::rebuild(&h.pool).await.unwrap();
    assert_eq!(projections(&h.pool).await, after_race);
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn an_alert_opens_once_and_reaches_the_webhook_once(pool: PgPool) {
    let h = Harness::new(pool, Kind::Opaque, 300, 0).await;
    let w = h.start("alerting").await;
    h.faults(crate::support::delay_deliver(Match::Any, 800));
    h.drive_until(w, "deliver", "review_required").await;

    // A receiver that records each delivery: its idempotency key, signature and body.
    let seen = Arc::new(std::sync::Mutex::new(
        Vec::<(String, String, Vec<u8>)>::new(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let recorded = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let recorded = recorded.clone();
                async move {
                    let key = headers["idempotency-key"].to_str().unwrap().to_owned();
                    let signature = headers["z29c-signature"].to_str().unwrap().to_owned();
                    recorded
                        .lock()
                        .unwrap()
                        .push((key, signature, body.to_vec()));
                    "ok"
                }
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let rules = engine::watch::alerts::AlertRules {
        max_unknown_age: std::time::Duration::ZERO,
    };
    assert_eq!(
        engine::watch::alerts::evaluate(&h.pool, &rules)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        engine::watch::alerts::evaluate(&h.pool, &rules)
            .await
            .unwrap(),
        0,
        "the alert opened twice"
    );
    let publisher = Publisher::new(h.pool.clone(), engine::outbox::consumers(Some(url.clone())));
    publish_all(&publisher).await;
    publish_all(&publisher).await;
    let receiver = engine::outbox::webhook::Receiver::new(url.clone(), "whsec_test").unwrap();
    assert_eq!(
        engine::outbox::webhook::deliver_webhooks(&h.pool, &receiver)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        engine::outbox::webhook::deliver_webhooks(&h.pool, &receiver)
            .await
            .unwrap(),
        0
    );
    let delivered = seen.lock().unwrap().clone();
    assert_eq!(delivered.len(), 1);
    // The receiver can tell the post is Z29C's: the signature is over the time and the body.
    let (_, signature, body) = &delivered[0];
    let sent_at: i64 = signature
        .strip_prefix("t=")
        .and_then(|rest| rest.split(',').next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(signature, &receiver.signature(sent_at, body));
    let other = engine::outbox::webhook::Receiver::new(url.clone(), "another key").unwrap();
    assert_ne!(signature, &other.signature(sent_at, body));
    assert_eq!(
        counter(
            &h.pool,
            "z29c_alerts_opened_total",
            r#"[["rule","unknown_outcome_age"]]"#
        )
        .await,
        1
    );

    // The cause goes away (an approver cancels the step): the alert resolves.
    let step: Uuid =
        sqlx::query_scalar("select id from step where workflow_id = $1 and logical = 'deliver'")
            .bind(w)
            .fetch_one(&h.pool)
            .await
            .unwrap();
    let carol = crate::operate::person("carol", engine::domain::Role::Approver);
    engine::recovery::perform(
        &h.pool,
        engine::recovery::Request {
            operator: &carol,
            step,
            seen_version: None,
            reason: "not needed",
            action: engine::recovery::Action::Cancel,
        },
    )
    .await
    .unwrap();
    engine::watch::alerts::evaluate(&h.pool, &rules)
        .await
        .unwrap();
    assert!(
        engine::read::alerts::open(&h.pool)
            .await
            .unwrap()
            .is_empty()
    );
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_consumers_status_read_is_planned_for_each_batch_never_kept_generic(pool: PgPool) {
    // After five executions PostgreSQL may keep one generic plan for a prepared statement; for
    // this read that plan was made while receipts were few and scanned them all per step.
    let h = Harness::new(pool.clone(), Kind::Idempotent, 2_000, 0).await;
    let mut ids = Vec::new();
    for n in 0..40 {
        ids.push(h.start(&format!("planned-{n}")).await);
    }
    let mut conn = pool.acquire().await.unwrap();
    for _ in 0..10 {
        let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
        let projected = engine::read::status::project_many(&mut tx, &ids)
            .await
            .unwrap();
        assert_eq!(projected.len(), ids.len());
        tx.commit().await.unwrap();
    }
    // This query is a prepared statement too, and its own text matches the pattern.
    let plans: (i64, i64) = sqlx::query_as(
        "select generic_plans, custom_plans from pg_prepared_statements
         where statement like '%s.generation, s.state as%'
           and statement not like '%pg_prepared_statements%'",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap();
    assert_eq!(
        plans,
        (0, 10),
        "(generic plans, custom plans) of the status read"
    );
}
