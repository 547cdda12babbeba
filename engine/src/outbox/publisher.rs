//! The publisher (docs/DESIGN.md §10): delivers every outbox event at least once to each
//! consumer it is given, each delivery in that consumer's own transaction, and marks the event
//! published only after all of them took it. Which consumers exist is the caller's choice
//! (`outbox::consumers` builds the standard set).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;

use crate::failpoint::{self, FaultPoint};
use crate::outbox::inbox::{Consumer, Event, take};
use crate::store;
use crate::watch::latency;

/// Delivers the outbox to its consumers.
#[derive(Clone)]
pub struct Publisher {
    pool: PgPool,
    consumers: Arc<Vec<Box<dyn Consumer>>>,
    batch: i64,
}

impl Publisher {
    /// A publisher delivering to `consumers`, in their order.
    pub fn new(pool: PgPool, consumers: Vec<Box<dyn Consumer>>) -> Self {
        Self {
            pool,
            consumers: Arc::new(consumers),
            batch: 200,
        }
    }

    /// One pass: claims up to a batch of unpublished events (skipping rows another publisher
    /// holds), delivers each to every consumer, then marks them published. Returns how many
    /// were published. An error leaves the batch unmarked: it is delivered again, and the
    /// consumers that already took an event ignore it.
    pub async fn publish_once(&self) -> sqlx::Result<usize> {
        let mut claim = self.pool.begin().await?;
        let events = store::outbox::take_batch(&mut claim, self.batch).await?;
        if events.is_empty() {
            return Ok(0);
        }
        let mut ids = Vec::with_capacity(events.len());
        for (id, row) in events {
            let event = Event::from(row);
            for consumer in self.consumers.iter() {
                self.deliver(consumer.as_ref(), &event).await?;
            }
            latency::outbox_handled(event.event_id);
            ids.push(id);
        }
        failpoint::hit(FaultPoint::DuringOutboxPublication);
        store::outbox::mark_published(&mut claim, &ids).await?;
        claim.commit().await?;
        Ok(ids.len())
    }

    /// Delivers one event to one consumer, exactly once in effect: the inbox row and the
    /// consumer's change commit together, and a repeat finds the inbox row.
    pub async fn deliver(&self, consumer: &dyn Consumer, event: &Event) -> sqlx::Result<bool> {
        let mut tx = self.pool.begin().await?;
        let fresh = take(&mut tx, consumer, event).await?;
        tx.commit().await?;
        Ok(fresh)
    }

    /// Publishes until `shutdown` resolves: woken by `NOTIFY z29c_outbox`, polling every
    /// `poll` as the fallback (a lost notification, a listener reconnecting).
    pub async fn run(self, poll: Duration, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut listener = match PgListener::connect_with(&self.pool).await {
            Ok(mut l) => match l.listen("z29c_outbox").await {
                Ok(()) => Some(l),
                Err(error) => {
                    tracing::warn!(%error, "outbox listener unavailable; polling only");
                    None
                }
            },
            Err(error) => {
                tracing::warn!(%error, "outbox listener unavailable; polling only");
                None
            }
        };
        loop {
            match self.publish_once().await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "outbox publication failed; retrying"),
            }
            let woken = async {
                match listener.as_mut() {
                    Some(l) => {
                        let _ = l.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = &mut shutdown => return,
                () = woken => {}
                () = tokio::time::sleep(poll) => {}
            }
        }
    }
}
