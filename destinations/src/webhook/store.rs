//! The webhook receiver's one SQL statement.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// An event to record.
pub(super) struct NewEvent<'a> {
    pub destination: &'a str,
    pub id: &'a str,
    pub channel: &'a str,
    pub subject: Option<&'a str>,
    /// The body as sent: `json` keeps its exact text.
    pub body: &'a str,
}

/// Records an event; `now` is `None` for the database's `now()` (bound `as _`, see
/// `crate::store`).
pub(super) async fn insert_event(
    pool: &PgPool,
    event: &NewEvent<'_>,
    now: Option<DateTime<Utc>>,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"insert into destination.webhook_event
               (destination, id, channel, subject, body, received_at)
           values ($1, $2, $3, $4, $5::text::json, coalesce($6, now()))"#,
        event.destination,
        event.id,
        event.channel,
        event.subject,
        event.body,
        now as _,
    )
    .execute(pool)
    .await
    .map(drop)
}
