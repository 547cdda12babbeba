//! Alerts keep flowing whatever their receiver does: the rules are evaluated in a task of
//! their own, the sender gives up on a receiver that never answers, and what it records of the
//! failure never holds the receiver's URL.

use std::time::Duration;

use destinations::Kind;
use engine::maintenance::{self, Services};
use engine::outbox::publisher::Publisher;
use engine::outbox::webhook::Receiver;
use sqlx::PgPool;

use crate::operate::unknown_delivery;
use crate::support::Harness;

async fn alerts(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from alert")
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn queued(pool: &PgPool) -> i64 {
    sqlx::query_scalar("select count(*) from webhook_delivery")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Publishes the outbox until nothing is left, then waits a little.
async fn publish(publisher: &Publisher) {
    publisher.drain().await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn a_webhook_receiver_that_never_answers_delays_no_alert(pool: PgPool) {
    let h = Harness::new(pool, Kind::Opaque, 300, 0).await;
    // A receiver that takes every connection and never answers; its URL carries its secret,
    // as a chat service's does.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/services/T0/B0/s3cr3t",
        listener.local_addr().unwrap()
    );
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let publisher = Publisher::new(h.pool.clone(), engine::outbox::consumers(Some(url.clone())));
    let rules = engine::watch::alerts::AlertRules {
        max_unknown_age: Duration::ZERO,
    };
    let every = Duration::from_millis(50);
    let receiver = Receiver::new(url, "whsec_test").unwrap();
    let services = Services::start(vec![
        Box::new(maintenance::alert_evaluation(h.pool.clone(), rules, every)),
        Box::new(maintenance::webhook_delivery(
            h.pool.clone(),
            receiver,
            every,
        )),
    ]);

    // The first alert opens and is queued; its delivery hangs.
    unknown_delivery(&h, "first", "review_required").await;
    for _ in 0..100 {
        publish(&publisher).await;
        if queued(&h.pool).await == 1 {
            break;
        }
    }
    assert_eq!(queued(&h.pool).await, 1, "the first alert was never queued");
    // A second cause while the first delivery hangs: its alert opens all the same.
    unknown_delivery(&h, "second", "review_required").await;
    for _ in 0..100 {
        publish(&publisher).await;
        if alerts(&h.pool).await == 2 {
            break;
        }
    }
    assert_eq!(alerts(&h.pool).await, 2, "the second alert did not open");
    let attempted: i64 =
        sqlx::query_scalar("select coalesce(sum(attempts), 0)::bigint from webhook_delivery")
            .fetch_one(&h.pool)
            .await
            .unwrap();
    assert_eq!(
        attempted, 0,
        "the second alert opened while the first delivery still hung"
    );

    // The sender gives up on the receiver, and says so without its URL.
    let mut recorded = None;
    for _ in 0..300 {
        recorded = sqlx::query_scalar::<_, Option<String>>(
            "select last_error from webhook_delivery where attempts > 0 limit 1",
        )
        .fetch_optional(&h.pool)
        .await
        .unwrap()
        .flatten();
        if recorded.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let recorded = recorded.expect("the hung delivery was given up and recorded");
    assert!(recorded.contains("did not answer in time"), "{recorded}");
    assert!(!recorded.contains("s3cr3t"), "{recorded}");
    services.stop().await;
}
