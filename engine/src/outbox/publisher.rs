//! The publisher (docs/DESIGN.md §10): delivers every outbox event at least once to each
//! consumer it is given, and marks the event published only after all of them took it. A batch
//! reaches each consumer in one transaction of that consumer's own, with its inbox rows; no
//! transaction stays open across consumers (an open one would hold back the cleanup that HOT
//! updates need). One publisher delivers at a time, across every process, by an advisory lock.
//! Which consumers exist is the caller's choice (`outbox::consumers` builds the standard set).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;

use crate::failpoint::{self, FaultPoint};
use crate::outbox::inbox::{Consumer, Event, take, take_all};
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
            batch: 500,
        }
    }

    /// One pass: unless another publisher is delivering, reads up to a batch of unpublished
    /// events, hands the whole batch to every consumer at once, then marks them published.
    /// Returns how many were published. An error leaves the batch unmarked: it is delivered
    /// again, and the consumers that already took an event ignore it.
    pub async fn publish_once(&self) -> sqlx::Result<usize> {
        let mut turn = self.pool.acquire().await?;
        if !store::outbox::try_lock_publisher(&mut turn).await? {
            return Ok(0);
        }
        let published = self.publish_batch().await;
        if let Err(error) = store::outbox::unlock_publisher(&mut turn).await {
            // A session that cannot say it let go must not go back to the pool holding on.
            tracing::warn!(%error, "could not release the publisher's lock; closing its connection");
            let _ = turn.detach();
        }
        published
    }

    async fn publish_batch(&self) -> sqlx::Result<usize> {
        let rows = {
            let mut conn = self.pool.acquire().await?;
            store::outbox::unpublished(&mut conn, self.batch).await?
        };
        if rows.is_empty() {
            return Ok(0);
        }
        let (ids, events): (Vec<i64>, Vec<Event>) = rows
            .into_iter()
            .map(|(id, row)| (id, Event::from(row)))
            .unzip();
        // The consumers take the batch at once, each in its own transaction: they share no
        // rows (each has its inbox and its own tables), so none waits for another.
        let events = Arc::new(events);
        let mut deliveries = tokio::task::JoinSet::new();
        for index in 0..self.consumers.len() {
            let (pool, consumers, events) =
                (self.pool.clone(), self.consumers.clone(), events.clone());
            deliveries.spawn(async move {
                let mut tx = pool.begin().await?;
                take_all(&mut tx, consumers[index].as_ref(), &events).await?;
                tx.commit().await
            });
        }
        let mut failed = None;
        while let Some(delivered) = deliveries.join_next().await {
            match delivered {
                Ok(Ok(())) => {}
                Ok(Err(error)) => failed = Some(error),
                Err(stopped) if stopped.is_panic() => {
                    std::panic::resume_unwind(stopped.into_panic())
                }
                Err(stopped) => failed = Some(sqlx::Error::Io(std::io::Error::other(stopped))),
            }
        }
        if let Some(error) = failed {
            return Err(error);
        }
        for event in events.iter() {
            latency::outbox_handled(event.event_id);
        }
        failpoint::hit(FaultPoint::DuringOutboxPublication);
        let mut conn = self.pool.acquire().await?;
        store::outbox::mark_published(&mut conn, &ids).await?;
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
