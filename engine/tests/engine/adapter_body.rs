//! The HTTP adapter reads at most `MAX_RESPONSE_BYTES` of an answer: a destination that answers
//! with an endless or enormous body leaves the outcome unknown, with a named reason, and costs
//! the worker no more memory than the cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use engine::adapter::{Adapter, DataAdapter, WithdrawalObservation};
use engine::domain::{
    AttemptOutcome, ContractKind, LookupObservation, RequestKey, StepKey, TransportObservation,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use uuid::Uuid;

/// The adapter's cap on a response body.
const MAX_RESPONSE_BYTES: usize = engine::adapter::MAX_RESPONSE_BYTES;

/// How much the server below offers: far past the cap, small enough not to strain a test machine
/// if an adapter read it all.
const OFFERED: usize = 64 * 1024 * 1024;
const _: () = assert!(
    OFFERED > 32 * MAX_RESPONSE_BYTES,
    "the offer is far past the cap"
);

/// A server answering every request with `status` and a JSON-looking body of `OFFERED` bytes,
/// read until the connection closes (or, with `declared`, a `Content-Length` of that size).
/// Returns its base URL and how many body bytes it managed to send.
async fn flooding_server(status: u16, declared: bool) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut request = [0_u8; 4096];
                let _ = stream.read(&mut request).await;
                let length = if declared {
                    format!("Content-Length: {OFFERED}\r\n")
                } else {
                    String::new()
                };
                let head = format!(
                    "HTTP/1.1 {status} Whatever\r\nContent-Type: application/json\r\n{length}Connection: close\r\n\r\n"
                );
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let mut chunk = vec![b' '; 64 * 1024];
                chunk[..2].copy_from_slice(b"[\"");
                for _ in 0..OFFERED / chunk.len() {
                    if stream.write_all(&chunk).await.is_err() {
                        return;
                    }
                    counter.fetch_add(chunk.len(), Ordering::Relaxed);
                    chunk[..2].copy_from_slice(b"  ");
                }
            });
        }
    });
    (url, sent)
}

fn adapter(url: &str) -> DataAdapter {
    engine::adapter::protocol::protocol_adapter(
        url,
        &engine::adapter::contracts::declared(ContractKind::Queryable, 10_000, 0, false),
    )
}

fn key() -> RequestKey {
    RequestKey::derive(Uuid::now_v7(), &StepKey::new("deliver", 1))
}

/// Well under what was offered: the adapter stopped reading near the cap. The server counts
/// what the kernel accepted, and loopback socket buffers grow to several MiB under load, so the
/// bound is half the offer (an adapter reading to the end takes all of it), not the cap itself.
fn assert_stopped_early(sent: &AtomicUsize) {
    let sent = sent.load(Ordering::Relaxed);
    assert!(
        sent < OFFERED / 2,
        "the server sent {sent} bytes of {OFFERED}: the adapter read past its cap"
    );
}

#[tokio::test]
async fn a_delivery_answered_with_an_endless_body_is_an_unknown_outcome_read_no_further_than_the_cap()
 {
    for declared in [false, true] {
        let (url, sent) = flooding_server(201, declared).await;
        let adapter = adapter(&url);
        let request = adapter.prepare_withdrawal(&key(), "x-1").unwrap();

        let seen = adapter.deliver(&key(), &request).await;

        assert_eq!(seen.outcome(), AttemptOutcome::OutcomeUnknown);
        match &seen {
            TransportObservation::UnreadableResponse { status, detail } => {
                assert_eq!(*status, 201);
                assert!(detail.contains("larger than 1 MiB"), "{detail}");
            }
            other => panic!("expected an unreadable response, saw {other:?}"),
        }
        assert_stopped_early(&sent);
    }
}

#[tokio::test]
async fn a_lookup_or_withdrawal_answered_with_an_endless_body_proves_nothing() {
    let (url, sent) = flooding_server(200, false).await;

    let lookup = adapter(&url)
        .lookup(&key(), "sha256:00", &serde_json::Value::Null)
        .await;
    match &lookup {
        LookupObservation::Unavailable { detail } => {
            assert!(detail.contains("larger than 1 MiB"), "{detail}");
        }
        other => panic!("expected the lookup to be unavailable, saw {other:?}"),
    }
    assert_stopped_early(&sent);

    let (url, sent) = flooding_server(201, false).await;
    let withdrawal = adapter(&url).withdraw(&key(), "x-1").await;
    match &withdrawal {
        WithdrawalObservation::Transport(TransportObservation::UnreadableResponse {
            detail,
            ..
        }) => assert!(detail.contains("larger than 1 MiB"), "{detail}"),
        other => panic!("expected an unreadable withdrawal answer, saw {other:?}"),
    }
    assert_stopped_early(&sent);
}
