//! The consumer side of the outbox (docs/DESIGN.md §10): what a consumer is, the event it is
//! handed, and what every consumer shares: its cursor ([`take_all`], [`take`]) and counters
//! ([`count`]). Nothing here knows which consumers exist or how events reach them, so every
//! consumer and the publisher can build on it without building on each other.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::adapter::BoxFuture;
use crate::domain::EventKind;
use crate::store;
use crate::store::outbox::Position;

/// One outbox event as consumers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Where it stands in the outbox: consumers take events in this order, once each.
    pub position: Position,
    pub event_id: Uuid,
    pub workflow_id: Option<Uuid>,
    pub revision: Option<i64>,
    /// The stored name of the event's kind; [`Event::kind`] reads it.
    pub kind: String,
    pub payload: Value,
}

impl Event {
    /// What the event announces; `None` for a kind this version does not know.
    pub fn kind(&self) -> Option<EventKind> {
        EventKind::parse(&self.kind)
    }
}

impl From<store::outbox::EventRow> for Event {
    fn from(row: store::outbox::EventRow) -> Self {
        Self {
            position: row.position,
            event_id: row.event_id,
            workflow_id: row.workflow_id,
            revision: row.revision,
            kind: row.kind,
            payload: row.payload,
        }
    }
}

/// A projection or side channel fed by the outbox.
pub trait Consumer: Send + Sync {
    /// Names the consumer's cursor; never change it once events were processed.
    fn name(&self) -> &'static str;

    /// Applies `event` inside `tx`, which also moves this consumer's cursor past it.
    fn handle<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        event: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>>;

    /// Applies `events` (in position order, each new to this consumer) inside `tx`, which also
    /// moves its cursor past them. One at a time unless the consumer knows better.
    fn handle_batch<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        events: &'a [Event],
    ) -> BoxFuture<'a, sqlx::Result<()>> {
        Box::pin(async move {
            for event in events {
                self.handle(&mut *tx, event).await?;
            }
            Ok(())
        })
    }
}

/// Applies those of `events` (in position order) that lie past `consumer`'s cursor and moves
/// the cursor past the last, all in `tx`: a redelivery changes nothing. `start` is where the
/// publisher stood when it read `events`: a consumer usually stands there too, and then one
/// statement moves and locks its cursor; one without a cursor starts there (it never sees
/// older events). Returns how many were new.
pub async fn take_all(
    tx: &mut PgConnection,
    consumer: &dyn Consumer,
    events: &[Event],
    start: Position,
) -> sqlx::Result<usize> {
    let Some(last) = events.last().map(|e| e.position) else {
        return Ok(0);
    };
    let name = consumer.name();
    if events[0].position > start
        && store::outbox::move_cursor_from(&mut *tx, name, start, last).await?
    {
        consumer.handle_batch(&mut *tx, events).await?;
        return Ok(events.len());
    }
    let taken = store::outbox::lock_cursor(&mut *tx, name, start).await?;
    let fresh = &events[events.partition_point(|e| e.position <= taken)..];
    if !fresh.is_empty() {
        consumer.handle_batch(&mut *tx, fresh).await?;
        store::outbox::advance_cursor(tx, name, last).await?;
    }
    Ok(fresh.len())
}

/// Adds `by` to counter `name` with `labels` (sorted `(key, value)` pairs).
pub async fn count(
    tx: &mut PgConnection,
    name: &str,
    labels: &[(&str, &str)],
    by: i64,
) -> sqlx::Result<()> {
    let mut labels: Vec<(&str, &str)> = labels.to_vec();
    labels.sort_unstable();
    let labels = serde_json::to_string(&labels).expect("labels serialize");
    store::projection::add_to_counter(tx, name, &labels, by).await
}

/// [`take_all`] for one event: applies it unless `consumer`'s cursor is past it. Returns
/// whether it was new to the consumer. Like `take_all`, it moves the cursor past the event:
/// events before it that the consumer has not taken are never handed to it.
pub async fn take(
    tx: &mut PgConnection,
    consumer: &dyn Consumer,
    event: &Event,
    start: Position,
) -> sqlx::Result<bool> {
    Ok(take_all(tx, consumer, std::slice::from_ref(event), start).await? == 1)
}
