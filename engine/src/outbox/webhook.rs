//! The alert webhook (docs/DESIGN.md §10, §11): an outbox consumer that queues each
//! `alert.opened` event once, by its cursor, and the sender that posts the queue with the event
//! id as `Idempotency-Key`, so an alert is never lost nor sent twice.

use std::time::Duration;

use sqlx::{PgConnection, PgPool};

use crate::adapter::BoxFuture;
use crate::domain::EventKind;
use crate::outbox::consumer::{Consumer, Event};
use crate::store;

/// The webhook's outbox consumer: queues each `alert.opened` event for delivery (once, by the
/// cursor); [`deliver_webhooks`] sends the queue.
pub struct Webhook {
    url: String,
}

impl Webhook {
    pub fn new(url: String) -> Self {
        Self { url }
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Consumer for Webhook {
    fn name(&self) -> &'static str {
        "webhook"
    }

    fn handle<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        event: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            if event.kind() != Some(EventKind::AlertOpened) {
                return Ok(());
            }
            store::alert::queue_webhook(tx, event.event_id, &event.payload).await
        })
    }
}

/// Where alerts and notifications are posted, and the key that signs them (docs/DESIGN.md
/// §11): each request carries `Z29C-Signature: t=UNIX,v1=HEX`, HMAC-SHA256 under the key of
/// `UNIX.BODY`, so a receiver can tell Z29C's posts from anyone's and refuse an old one
/// replayed. The client gives up on a receiver after a few seconds and follows no redirect,
/// and what is recorded of a failure never holds the URL (a chat service's URL is its secret).
#[derive(Clone)]
pub struct Receiver {
    url: String,
    key: Vec<u8>,
    client: reqwest::Client,
}

/// How long a receiver may take to accept the connection, and to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

impl Receiver {
    /// A receiver at `url`, signing with `key`.
    pub fn new(url: String, key: &str) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(ANSWER_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.without_url().to_string())?;
        Ok(Self {
            url,
            key: key.as_bytes().to_vec(),
            client,
        })
    }

    /// The `Z29C-Signature` header of `body` sent at `unix` seconds.
    pub fn signature(&self, unix: i64, body: &[u8]) -> String {
        use hmac::Mac;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.key)
            .expect("HMAC takes a key of any length");
        mac.update(format!("{unix}.").as_bytes());
        mac.update(body);
        format!("t={unix},v1={}", hex::encode(mac.finalize().into_bytes()))
    }

    /// Posts `payload` with `idempotency_key`, signed; `Err` says why it was not accepted,
    /// without the URL.
    pub async fn post(
        &self,
        idempotency_key: &str,
        payload: &serde_json::Value,
    ) -> Result<(), String> {
        let body = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
        let signature = self.signature(chrono::Utc::now().timestamp(), &body);
        let answer = self
            .client
            .post(&self.url)
            .header("Idempotency-Key", idempotency_key)
            .header("Z29C-Signature", signature)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await;
        match answer {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!("the receiver answered {}", r.status())),
            Err(e) if e.is_timeout() => Err("the receiver did not answer in time".to_owned()),
            Err(e) => Err(e.without_url().to_string()),
        }
    }
}

/// Posts every queued webhook delivery with its event id as `Idempotency-Key`, and marks each
/// delivered once the receiver answered 2xx. Returns how many were delivered.
pub async fn deliver_webhooks(pool: &PgPool, receiver: &Receiver) -> sqlx::Result<usize> {
    let due = store::alert::due_webhooks(pool).await?;
    let mut delivered = 0;
    for (event_id, payload) in due {
        let error = receiver.post(&event_id.to_string(), &payload).await.err();
        let succeeded = error.is_none();
        store::alert::record_webhook_attempt(pool, event_id, error).await?;
        delivered += usize::from(succeeded);
    }
    Ok(delivered)
}

/// Sends every due notification candidate to `receiver` (its id as the idempotency key, the
/// workflow and its status sentence as the body); returns (sent, superseded) as
/// [`crate::outbox::projections::dispatch_notifications`] counts them.
pub async fn deliver_notifications(
    pool: &PgPool,
    receiver: &Receiver,
) -> sqlx::Result<(usize, usize)> {
    let send = |id: i64, workflow: uuid::Uuid, sentence: String| async move {
        let payload = serde_json::json!({ "workflow": workflow, "status": sentence });
        receiver
            .post(&format!("notification-{id}"), &payload)
            .await
            .is_ok()
    };
    crate::outbox::projections::dispatch_notifications(pool, send).await
}
