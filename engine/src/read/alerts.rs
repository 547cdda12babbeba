//! The open alerts, as the console shows them at the head of the review queue
//! (docs/DESIGN.md §11). The rules that open and resolve them are `watch::alerts`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// An alert as the console shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub id: Uuid,
    pub rule: String,
    pub subject: String,
    pub details: Value,
    pub opened_at: DateTime<Utc>,
}

/// Every open alert, newest first.
pub async fn open(pool: &PgPool) -> sqlx::Result<Vec<Alert>> {
    sqlx::query_as!(
        Alert,
        r#"select id, rule, subject, details, opened_at as "opened_at: DateTime<Utc>"
           from alert where resolved_at is null order by opened_at desc limit 200"#
    )
    .fetch_all(pool)
    .await
}
