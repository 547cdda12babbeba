//! The demo's destinations are trusted only once they prove they are the processes it started:
//! whatever else answers on the demo's fixed ports is refused with a sentence. Its queue shows
//! unknown outcomes of both shipped definitions, under APIs of different shapes.

use std::collections::BTreeSet;
use std::time::Duration;

use destinations::{Kind, RunningDestination, Secret, Service};
use engine::domain::StepState;
use engine::read::queue::{QueueFilter, QueueRow, queue};
use server::demo::{self, Endpoints, Secrets, control_token, wait_until_up};
use sqlx::PgPool;
use tokio::process::Command;

/// A program that answers every request with 200; returns its port.
async fn impostor() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().fallback(|| async { "{}" });
    let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, task)
}

/// Stands for the destination process the demo started (alive, not yet answering).
fn child() -> tokio::process::Child {
    Command::new("sleep")
        .arg("30")
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn the_demo_refuses_a_port_answered_by_a_process_it_did_not_start() {
    let (port, server) = impostor().await;
    let refused = wait_until_up(port, &mut child()).await.unwrap_err();
    assert!(
        refused.to_string().contains(&format!(
            "port {port} is held by a process this demo did not start"
        )),
        "{refused}"
    );
    server.abort();
}

#[tokio::test]
async fn the_demo_refuses_a_destination_started_with_another_control_token() {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .connect_lazy("postgres://127.0.0.1:9/unused")
        .unwrap();
    let stranger = destinations::spawn(pool, destinations::Config::new(Kind::Opaque))
        .await
        .unwrap();
    let refused = wait_until_up(stranger.addr().port(), &mut child())
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("did not start"), "{refused}");
}

#[tokio::test]
async fn the_demo_accepts_the_destination_it_gave_its_control_token() {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .connect_lazy("postgres://127.0.0.1:9/unused")
        .unwrap();
    let config = destinations::Config {
        control_token: control_token().clone(),
        ..destinations::Config::new(Kind::Opaque)
    };
    let ours = destinations::spawn(pool, config).await.unwrap();
    wait_until_up(ours.addr().port(), &mut child())
        .await
        .unwrap();
}

/// The demo's five destinations in this process, on one database of their own, with the demo's
/// control token and secrets (as `Demo::start` gives its child processes).
async fn demo_destinations(z29c: &PgPool, secrets: &Secrets) -> Vec<RunningDestination> {
    let pool = destinations::database_beside(z29c).await.unwrap();
    let mut running = Vec::new();
    for service in Service::ALL {
        let mut config = destinations::Config {
            control_token: control_token().clone(),
            visibility_window: Duration::from_millis(1_500),
            ..service.config()
        };
        match service {
            Service::Payments => {
                config.api_key = Some(Secret::new(&secrets.payments_key().unwrap()));
            }
            Service::Webhook => {
                config.signing_secret = Some(Secret::new(&secrets.webhook_secret().unwrap()));
            }
            Service::Protocol(_) => {}
        }
        running.push(destinations::spawn(pool.clone(), config).await.unwrap());
    }
    running
}

fn row<'a>(rows: &'a [QueueRow], workflow: &str, logical: &str) -> Option<&'a QueueRow> {
    rows.iter()
        .find(|r| r.creation_key == workflow && r.logical == logical)
}

#[sqlx::test(migrator = "engine::db::MIGRATOR")]
async fn the_demo_queue_shows_unknown_outcomes_of_documents_and_of_payments(pool: PgPool) {
    crate::support::allow_temporary_secrets();
    let data = tempfile::tempdir().unwrap();
    let secrets = Secrets::in_dir(data.path()).unwrap();
    let running = demo_destinations(&pool, &secrets).await;
    let endpoints = Endpoints::new(std::array::from_fn(|i| {
        format!("http://{}", running[i].addr())
    }));
    demo::register(&pool, &endpoints, &secrets).await.unwrap();
    let created = demo::seed_at(&pool, &endpoints).await.unwrap();
    assert_eq!(created, 23);

    let mut config = engine::worker::WorkerConfig::named("demo-test");
    config.retry.base = Duration::from_millis(10);
    config.retry.cap = Duration::from_millis(100);
    let adapters = engine::adapter::registry::Adapters::load(&pool)
        .await
        .unwrap();
    let worker = engine::worker::Worker::new(pool.clone(), config, adapters);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let rows = loop {
        worker.run_once().await.unwrap();
        let rows = queue(&pool, &QueueFilter::default(), None, 200)
            .await
            .unwrap();
        // Waiting for a person: the documents' and the payments' unknown outcomes and refusals.
        let queued = [
            ("demo-letter-2", "deliver"),
            ("demo-payment-2", "charge"),
            ("demo-payment-3", "charge"),
            ("demo-payment-5", "receipt"),
        ]
        .iter()
        .all(|(w, l)| row(&rows, w, l).is_some());
        // Recovered on their own: the charge by same-key replay, the receipt by asking.
        let recovered = ["demo-payment-1", "demo-payment-4"]
            .iter()
            .all(|w| !rows.iter().any(|r| r.creation_key == *w));
        if queued && recovered {
            break rows;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the demo's queue never settled: {:?}",
            rows.iter()
                .map(|r| (&r.creation_key, &r.logical, r.state))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let definitions: BTreeSet<&str> = rows.iter().map(|r| r.definition_name.as_str()).collect();
    assert_eq!(
        definitions,
        BTreeSet::from(["document_delivery", "payment_receipt"])
    );
    let declined = row(&rows, "demo-payment-2", "charge").unwrap();
    assert_eq!(
        (declined.state, declined.adapter.as_deref()),
        (StepState::Rejected, Some("payments"))
    );
    let reviewed = row(&rows, "demo-payment-3", "charge").unwrap();
    assert_eq!(
        (reviewed.state, reviewed.adapter.as_deref()),
        (StepState::ReviewRequired, Some("payments-reviewed"))
    );
    let receipt = row(&rows, "demo-payment-5", "receipt").unwrap();
    assert_eq!(
        (receipt.state, receipt.adapter.as_deref()),
        (StepState::Rejected, Some("mailer"))
    );

    // A restarted demo applies the same files again: nothing changes, and they stay verified.
    demo::register(&pool, &endpoints, &secrets).await.unwrap();
    let adapters = engine::store::adapter::all(&pool).await.unwrap();
    for name in ["payments", "payments-reviewed", "partner-webhook", "mailer"] {
        let adapter = adapters.iter().find(|a| a.name == name).unwrap();
        assert_eq!(
            (adapter.contract_version, adapter.verified_version),
            (1, Some(1)),
            "{name}"
        );
        let source = adapter.source.as_deref().unwrap();
        assert!(!source.contains("{ env: "), "{name}: {source}");
        assert_eq!(
            source.contains("{ file: "),
            name != "mailer",
            "{name}: {source}"
        );
    }
}

#[test]
fn the_demo_keeps_its_destination_secrets_in_private_files_and_reuses_them() {
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::tempdir().unwrap();
    let first = Secrets::in_dir(data.path()).unwrap();
    let again = Secrets::in_dir(data.path()).unwrap();
    assert_eq!(first.payments_key().unwrap(), again.payments_key().unwrap());
    assert_eq!(
        first.webhook_secret().unwrap(),
        again.webhook_secret().unwrap()
    );
    assert_ne!(
        first.payments_key().unwrap(),
        first.webhook_secret().unwrap()
    );
    for file in ["payments-api-key", "webhook-secret"] {
        let mode = std::fs::metadata(data.path().join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
}
