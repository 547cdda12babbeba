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

/// Posts every queued webhook delivery to `url` with its event id as `Idempotency-Key`, and
/// marks each delivered once the receiver answered 2xx. Returns how many were delivered.
pub async fn deliver_webhooks(
    pool: &PgPool,
    client: &reqwest::Client,
    url: &str,
) -> sqlx::Result<usize> {
    let due = store::alert::due_webhooks(pool).await?;
    let mut delivered = 0;
    for (event_id, payload) in due {
        let answer = client
            .post(url)
            .header("Idempotency-Key", event_id.to_string())
            .json(&payload)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        let error = match answer {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("answered {}", r.status())),
            Err(e) => Some(e.to_string()),
        };
        let succeeded = error.is_none();
        store::alert::record_webhook_attempt(pool, event_id, error).await?;
        delivered += usize::from(succeeded);
    }
    Ok(delivered)
}
