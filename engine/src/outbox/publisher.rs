//! The publisher (docs/DESIGN.md §10): delivers every final outbox event, in position order,
//! at least once to each consumer it is given, and moves its own cursor past a batch only after
//! all of them took it. A batch reaches each consumer in one transaction of that consumer's own,
//! which also moves the consumer's cursor; no transaction stays open across consumers (an open
//! one would hold back the cleanup that HOT updates need). One publisher delivers at a time,
//! across every process, by an advisory lock. Which consumers exist is the caller's choice
//! (`outbox::consumers` builds the standard set).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use crate::failpoint::{self, FaultPoint};
use crate::outbox::consumer::{Consumer, Event, take_all};
use crate::store;
use crate::store::outbox::PUBLISHER;
use crate::watch::latency;

/// How long the publisher waits, unless notified sooner, before looking again at events held
/// back by a transaction still running.
pub(crate) const HELD_BACK: Duration = Duration::from_millis(20);

/// What one [`Publisher::publish_once`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Events handed to every consumer.
    pub published: usize,
    /// Whether events past those were left for later because they are not final yet: written
    /// by a transaction that is still running or that is newer than one still running, so an
    /// event that must come before them may still appear.
    pub held_back: bool,
    /// Whether another publisher was delivering, so this pass did nothing.
    pub busy: bool,
}

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

    /// The database this publisher delivers from.
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// One pass: unless another publisher is delivering, reads up to a batch of final events
    /// past the publisher's cursor, hands the whole batch to every consumer at once, then moves
    /// the cursor past it. An error leaves the cursor where it was: the batch is delivered again,
    /// and each consumer that already took it finds its own cursor past it.
    pub async fn publish_once(&self) -> sqlx::Result<Pass> {
        let mut turn = self.pool.acquire().await?;
        if !store::outbox::try_lock_publisher(&mut turn).await? {
            return Ok(Pass {
                busy: true,
                ..Pass::default()
            });
        }
        let pass = self.publish_batch().await;
        if let Err(error) = store::outbox::unlock_publisher(&mut turn).await {
            // A session that cannot say it let go must not go back to the pool holding on.
            tracing::warn!(%error, "could not release the publisher's lock; closing its connection");
            let _ = turn.detach();
        }
        pass
    }

    async fn publish_batch(&self) -> sqlx::Result<Pass> {
        let (published, rows, held_back) = {
            let mut conn = self.pool.acquire().await?;
            store::outbox::unpublished(&mut conn, self.batch).await?
        };
        let Some(last) = rows.last().map(|r| r.position) else {
            return Ok(Pass {
                held_back,
                ..Pass::default()
            });
        };
        // The consumers take the batch at once, each in its own transaction: they share no
        // rows (each has its cursor and its own tables), so none waits for another.
        let events: Arc<Vec<Event>> = Arc::new(rows.into_iter().map(Event::from).collect());
        let mut deliveries = tokio::task::JoinSet::new();
        for index in 0..self.consumers.len() {
            let (pool, consumers, events) =
                (self.pool.clone(), self.consumers.clone(), events.clone());
            deliveries.spawn(async move {
                let mut tx = pool.begin().await?;
                take_all(&mut tx, consumers[index].as_ref(), &events, published).await?;
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
        store::outbox::advance_cursor(&mut conn, PUBLISHER, last).await?;
        Ok(Pass {
            published: events.len(),
            held_back,
            busy: false,
        })
    }

    /// Publishes until every event written so far has reached every consumer, waiting out the
    /// transactions that hold events back (see [`Pass::held_back`]) and another publisher's
    /// turn (its batch may end before the events written so far do); returns how many events
    /// this publisher delivered.
    pub async fn drain(&self) -> sqlx::Result<usize> {
        let mut published = 0;
        loop {
            let pass = self.publish_once().await?;
            published += pass.published;
            if pass.published == 0 {
                if !pass.held_back && !pass.busy {
                    return Ok(published);
                }
                tokio::time::sleep(HELD_BACK).await;
            }
        }
    }
}
