//! The demo's destinations are trusted only once they prove they are the processes it started:
//! whatever else answers on the demo's fixed ports is refused with a sentence.

use destinations::Kind;
use server::harness::demo::{control_token, wait_until_up};
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
