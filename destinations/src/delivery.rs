//! What each kind of destination does with a request, between the wire and the SQL.

use sqlx::PgPool;

use crate::config::Config;
use crate::protocol::{DeliveryRequest, LookupAnswer};
use crate::store::{self, Delivery, NewDelivery, Withdrawal};

/// How a delivery request ended.
#[derive(Debug)]
pub(crate) enum Creation {
    /// A new delivery was committed.
    Accepted(Delivery),
    /// The key was already used with the same digest: the original delivery.
    Replayed(Delivery),
    /// The key was already used with another digest; nothing was committed.
    KeyConflict { first_digest: String },
}

/// Records a delivery. Only the idempotent kind deduplicates, by `idempotency_key`; the
/// others ignore the key and commit a new delivery every time.
pub(crate) async fn create(
    pool: &PgPool,
    config: &Config,
    request: &DeliveryRequest,
    idempotency_key: Option<&str>,
) -> sqlx::Result<Creation> {
    let idempotency_key = idempotency_key.filter(|_| config.kind.accepts_idempotency_key());
    let new = NewDelivery {
        destination: &config.name,
        client_reference: &request.client_reference,
        idempotency_key,
        digest: &request.digest,
        recipient: &request.recipient,
        summary: &request.summary,
        now: config.clock.fixed_now(),
    };
    if let Some(delivery) = store::insert_delivery(pool, new).await? {
        return Ok(Creation::Accepted(delivery));
    }
    // Only a keyed insert can conflict, and only with a committed row, which is never deleted.
    let original = match idempotency_key {
        Some(key) => store::delivery_by_key(pool, &config.name, key).await?,
        None => None,
    }
    .ok_or(sqlx::Error::RowNotFound)?;
    Ok(if original.digest == request.digest {
        Creation::Replayed(original)
    } else {
        Creation::KeyConflict {
            first_digest: original.digest,
        }
    })
}

/// Answers a lookup by client reference from the status index, which shows a delivery only
/// once the visibility window has passed since its acceptance.
pub(crate) async fn look_up(
    pool: &PgPool,
    config: &Config,
    client_reference: &str,
    digest: Option<&str>,
) -> sqlx::Result<LookupAnswer> {
    let window_ms = config.visibility_window_ms().unwrap_or_default();
    let visible = store::visible_deliveries(
        pool,
        &config.name,
        client_reference,
        i64::try_from(window_ms).unwrap_or(i64::MAX),
        config.clock.fixed_now(),
    )
    .await?;
    let all = visible
        .iter()
        .map(|delivery| delivery.external_reference.clone())
        .collect();
    let Some(earliest) = visible.into_iter().next() else {
        return Ok(LookupAnswer::NotFound {
            visibility_window_ms: window_ms,
        });
    };
    Ok(if digest.is_none_or(|digest| digest == earliest.digest) {
        LookupAnswer::Found {
            external_reference: earliest.external_reference,
            digest: earliest.digest,
            accepted_at: earliest.accepted_at,
            all,
        }
    } else {
        LookupAnswer::FoundWithConflictingDigest {
            external_reference: earliest.external_reference,
            digest: earliest.digest,
            all,
        }
    })
}

/// How a withdrawal request ended.
#[derive(Debug)]
pub(crate) enum WithdrawalOutcome {
    /// A new withdrawal was committed.
    Recorded(Withdrawal),
    /// The delivery was already withdrawn (under this key or another): the original withdrawal.
    Replayed(Withdrawal),
    /// The key already withdrew another delivery; nothing was committed.
    KeyConflict { first_withdrawn: String },
    /// No such delivery at this destination.
    UnknownDelivery,
}

/// Withdraws a delivery: at most one withdrawal per delivery, deduplicated by key.
pub(crate) async fn withdraw(
    pool: &PgPool,
    config: &Config,
    external_reference: &str,
    idempotency_key: &str,
) -> sqlx::Result<WithdrawalOutcome> {
    let destination = config.name.as_str();
    let now = config.clock.fixed_now();
    if let Some(withdrawal) =
        store::insert_withdrawal(pool, destination, external_reference, idempotency_key, now)
            .await?
    {
        return Ok(WithdrawalOutcome::Recorded(withdrawal));
    }
    if let Some(withdrawal) = store::withdrawal_by_key(pool, destination, idempotency_key).await? {
        return Ok(if withdrawal.external_reference == external_reference {
            WithdrawalOutcome::Replayed(withdrawal)
        } else {
            WithdrawalOutcome::KeyConflict {
                first_withdrawn: withdrawal.external_reference,
            }
        });
    }
    Ok(
        match store::withdrawal_of(pool, destination, external_reference).await? {
            Some(withdrawal) => WithdrawalOutcome::Replayed(withdrawal),
            None => WithdrawalOutcome::UnknownDelivery,
        },
    )
}
