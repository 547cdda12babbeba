//! The outbox publisher and its inbox consumers (DESIGN.md § Outbox and inbox).
//!
//! Workflow transitions and outbox rows commit together; the [`Publisher`] delivers every row
//! at least once to every consumer, and marks it published only after all of them took it. A
//! consumer records the event id in its inbox in the same transaction as its own change, so a
//! redelivery (after a crash between delivery and marking) changes nothing. Consumers of
//! workflow state compare revisions: an older or repeated revision is ignored, and a gap is
//! repaired by re-projecting from durable workflow state, never by silently advancing.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use sqlx::postgres::PgListener;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::adapter::BoxFuture;

/// One outbox event as consumers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub event_id: Uuid,
    pub workflow_id: Option<Uuid>,
    pub revision: Option<i64>,
    pub kind: String,
    pub payload: Value,
}

/// A projection or side channel fed by the outbox.
pub trait Consumer: Send + Sync {
    /// Names the consumer in the inbox; never change it once events were processed.
    fn name(&self) -> &'static str;

    /// Applies `event` inside `tx`, which also records it in this consumer's inbox.
    fn handle<'a>(
        &'a self,
        tx: &'a mut PgConnection,
        event: &'a Event,
    ) -> BoxFuture<'a, sqlx::Result<()>>;
}

/// Where a workflow event stands against what a consumer has applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revision {
    /// The next revision: apply it.
    Next,
    /// Already reflected (a repeat, or an older event arriving late): ignore it.
    Stale,
    /// Events in between have not arrived: repair from durable state.
    Gap { applied: i64 },
}

/// Compares an event's revision with what `consumer` applied for its workflow (locking that
/// record until the caller's transaction ends); [`settle_revision`] records the new one.
pub async fn revision(
    tx: &mut PgConnection,
    consumer: &str,
    workflow: Uuid,
    revision: i64,
) -> sqlx::Result<Revision> {
    let applied = sqlx::query_scalar!(
        r#"select revision from consumer_revision where consumer = $1 and workflow_id = $2 for update"#,
        consumer,
        workflow
    )
    .fetch_optional(&mut *tx)
    .await?
    .unwrap_or(0);
    Ok(if revision <= applied {
        Revision::Stale
    } else if revision == applied + 1 {
        Revision::Next
    } else {
        Revision::Gap { applied }
    })
}

/// Records that `consumer` reflects `workflow` up to `revision`.
pub async fn settle_revision(
    tx: &mut PgConnection,
    consumer: &str,
    workflow: Uuid,
    revision: i64,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into consumer_revision (consumer, workflow_id, revision) values ($1, $2, $3)
           on conflict (consumer, workflow_id)
           do update set revision = greatest(consumer_revision.revision, excluded.revision)"#,
        consumer,
        workflow,
        revision,
    )
    .execute(tx)
    .await?;
    Ok(())
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
    sqlx::query!(
        r#"insert into metric_counter (name, labels, value) values ($1, $2, $3)
           on conflict (name, labels) do update set value = metric_counter.value + excluded.value"#,
        name,
        labels,
        by,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Records `event` in `consumer`'s inbox and, unless it was there already, applies it, both
/// in `tx`. Returns whether the event was new to the consumer.
pub async fn take(
    tx: &mut PgConnection,
    consumer: &dyn Consumer,
    event: &Event,
) -> sqlx::Result<bool> {
    let fresh = sqlx::query!(
        r#"insert into inbox (consumer, event_id) values ($1, $2) on conflict do nothing"#,
        consumer.name(),
        event.event_id
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if fresh {
        consumer.handle(tx, event).await?;
    }
    Ok(fresh)
}

/// Delivers the outbox to its consumers.
#[derive(Clone)]
pub struct Publisher {
    pool: PgPool,
    consumers: Arc<Vec<Box<dyn Consumer>>>,
    batch: i64,
}

impl Publisher {
    pub fn new(pool: PgPool, consumers: Vec<Box<dyn Consumer>>) -> Self {
        Self {
            pool,
            consumers: Arc::new(consumers),
            batch: 200,
        }
    }

    /// The consumers every Z29C process runs: the status projection, the metrics projection,
    /// notification candidates, and (with a URL) the alert webhook.
    pub fn standard(pool: PgPool, webhook: Option<String>) -> Self {
        let mut consumers: Vec<Box<dyn Consumer>> = vec![
            Box::new(crate::projections::StatusProjection),
            Box::new(crate::projections::MetricsProjection),
            Box::new(crate::projections::NotificationCandidates),
        ];
        if let Some(url) = webhook {
            consumers.push(Box::new(crate::alerts::Webhook::new(url)));
        }
        Self::new(pool, consumers)
    }

    /// One pass: claims up to a batch of unpublished events (skipping rows another publisher
    /// holds), delivers each to every consumer, then marks them published. Returns how many
    /// were published. An error leaves the batch unmarked: it is delivered again, and the
    /// consumers that already took an event ignore it.
    pub async fn publish_once(&self) -> sqlx::Result<usize> {
        let mut claim = self.pool.begin().await?;
        let events = sqlx::query!(
            r#"select id, event_id, workflow_id, revision, kind, payload from outbox
               where published_at is null order by id limit $1 for update skip locked"#,
            self.batch
        )
        .fetch_all(&mut *claim)
        .await?;
        if events.is_empty() {
            return Ok(0);
        }
        let mut ids = Vec::with_capacity(events.len());
        for row in events {
            let event = Event {
                event_id: row.event_id,
                workflow_id: row.workflow_id,
                revision: row.revision,
                kind: row.kind,
                payload: row.payload,
            };
            for consumer in self.consumers.iter() {
                self.deliver(consumer.as_ref(), &event).await?;
            }
            ids.push(row.id);
        }
        crate::failpoint::hit("during_outbox_publication");
        sqlx::query!(
            r#"update outbox set published_at = now() where id = any($1)"#,
            &ids
        )
        .execute(&mut *claim)
        .await?;
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
