//! The services of a serving process (docs/DESIGN.md §10, §11, §19, §20): the outbox
//! publisher, alert evaluation, adapters' breakers, webhook and notification delivery, and
//! forgetting old sign-in attempts.
//! Each runs in a task of its own, so a receiver that never answers holds up no alert rule and
//! no publication.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;

use super::{Failure, Pace, Periodic, Service};
use crate::adapter::BoxFuture;
use crate::outbox::publisher::{HELD_BACK, Publisher};
use crate::outbox::webhook::{self, Receiver};
use crate::watch::alerts::{self, AlertRules};
use crate::watch::breaker;

/// `outbox_publisher`: publishes the outbox, woken by `NOTIFY z29c_outbox`, looking again every
/// `poll` in any case (a lost notification, a listener reconnecting).
pub struct OutboxPublisher {
    publisher: Publisher,
    poll: Duration,
    /// `None` until the first turn connects it, and again after a connection failed.
    listener: Option<PgListener>,
    listening: bool,
}

impl OutboxPublisher {
    pub fn new(publisher: Publisher, poll: Duration) -> Self {
        Self {
            publisher,
            poll,
            listener: None,
            listening: false,
        }
    }

    async fn listen(&mut self) {
        if self.listening {
            return;
        }
        self.listening = true;
        let connected = async {
            let mut listener = PgListener::connect_with(self.publisher.pool()).await?;
            listener.listen("z29c_outbox").await?;
            Ok::<_, sqlx::Error>(listener)
        };
        match connected.await {
            Ok(listener) => self.listener = Some(listener),
            Err(error) => tracing::warn!(%error, "outbox listener unavailable; polling only"),
        }
    }
}

impl Service for OutboxPublisher {
    fn name(&self) -> &'static str {
        "outbox_publisher"
    }

    fn every(&self) -> Duration {
        self.poll
    }

    fn turn(&mut self) -> BoxFuture<'_, Result<Pace, Failure>> {
        Box::pin(async move {
            self.listen().await;
            let pass = self.publisher.publish_once().await?;
            Ok(if pass.published > 0 {
                Pace::Again
            } else if pass.held_back {
                // Not final yet: its transaction, or an older one, is still running. The next
                // commit that writes events notifies; one that writes none does not, so look
                // again soon in any case.
                Pace::After(HELD_BACK)
            } else {
                Pace::Interval
            })
        })
    }

    fn woken(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            match self.listener.as_mut() {
                Some(listener) => {
                    let _ = listener.recv().await;
                }
                None => std::future::pending().await,
            }
        })
    }
}

/// `alert_evaluation`: opens alerts whose cause appeared and resolves those whose cause is gone
/// ([`alerts::evaluate`]).
pub fn alert_evaluation(pool: PgPool, rules: AlertRules, every: Duration) -> impl Service {
    Periodic::new(
        "alert_evaluation",
        every,
        move || -> BoxFuture<'static, Result<(), Failure>> {
            let pool = pool.clone();
            Box::pin(async move {
                alerts::evaluate(&pool, &rules).await?;
                Ok(())
            })
        },
    )
}

/// `adapter_breaker`: holds each adapter whose declared breaker trips
/// ([`breaker::trip_breakers`]).
pub fn adapter_breaker(pool: PgPool, every: Duration) -> impl Service {
    Periodic::new(
        "adapter_breaker",
        every,
        move || -> BoxFuture<'static, Result<(), Failure>> {
            let pool = pool.clone();
            Box::pin(async move {
                breaker::trip_breakers(&pool).await?;
                Ok(())
            })
        },
    )
}

/// `webhook_delivery`: posts the queued alerts to the receiver ([`webhook::deliver_webhooks`]).
pub fn webhook_delivery(pool: PgPool, receiver: Receiver, every: Duration) -> impl Service {
    Periodic::new(
        "webhook_delivery",
        every,
        move || -> BoxFuture<'static, Result<(), Failure>> {
            let (pool, receiver) = (pool.clone(), receiver.clone());
            Box::pin(async move {
                webhook::deliver_webhooks(&pool, &receiver).await?;
                Ok(())
            })
        },
    )
}

/// `notification_delivery`: sends the due notification candidates to the receiver
/// ([`webhook::deliver_notifications`]).
pub fn notification_delivery(pool: PgPool, receiver: Receiver, every: Duration) -> impl Service {
    Periodic::new(
        "notification_delivery",
        every,
        move || -> BoxFuture<'static, Result<(), Failure>> {
            let (pool, receiver) = (pool.clone(), receiver.clone());
            Box::pin(async move {
                webhook::deliver_notifications(&pool, &receiver).await?;
                Ok(())
            })
        },
    )
}

/// `sign_in_forgetting`: every ten minutes, deletes the sign-in attempts throttling no longer
/// counts and the old failure counts ([`crate::operators::forget_old_attempts`]).
pub fn sign_in_forgetting(pool: PgPool) -> impl Service {
    let every = Duration::from_secs(10 * 60);
    Periodic::new(
        "sign_in_forgetting",
        every,
        move || -> BoxFuture<'static, Result<(), Failure>> {
            let pool = pool.clone();
            Box::pin(async move {
                crate::operators::forget_old_attempts(&pool).await?;
                Ok(())
            })
        },
    )
}
