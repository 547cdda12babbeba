//! Alerts the engine raises from durable state: any invariant violation, an outcome unknown
//! for longer than a limit, a duplicate-effect incident opened. Each opens once per subject
//! (and resolves when its cause is gone), emits `alert.opened` through the outbox, and can
//! reach a webhook through the outbox too (`outbox::webhook`), so an alert is never lost nor
//! sent twice. The console reads open alerts through `read::alerts`.

use std::time::Duration;

use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::EventKind;
use crate::store::{alert, journal};

/// Thresholds of the alert rules.
#[derive(Debug, Clone, Copy)]
pub struct AlertRules {
    /// An outcome unknown (or waiting for review) longer than this raises an alert.
    pub max_unknown_age: Duration,
}

impl Default for AlertRules {
    fn default() -> Self {
        Self {
            max_unknown_age: Duration::from_secs(15 * 60),
        }
    }
}

/// Evaluates every rule against durable state: opens alerts whose cause appeared, resolves
/// those whose cause is gone. Returns how many were opened.
pub async fn evaluate(pool: &PgPool, rules: &AlertRules) -> sqlx::Result<usize> {
    let max_age_secs = i64::try_from(rules.max_unknown_age.as_secs()).unwrap_or(i64::MAX);
    let mut tx = pool.begin().await?;
    let causes = alert::current_causes(&mut tx, max_age_secs).await?;
    let rules_now: Vec<String> = causes.iter().map(|c| c.rule.clone()).collect();
    let subjects_now: Vec<String> = causes.iter().map(|c| c.subject.clone()).collect();
    // Resolved: an open alert whose cause is no longer there. Invariant violations stay open
    // until a person resolves them: the record of a broken rule is the point.
    alert::resolve_absent(&mut tx, &rules_now, &subjects_now).await?;
    let mut opened = 0;
    for cause in causes {
        let id = Uuid::now_v7();
        if alert::open_alert(&mut tx, id, &cause.rule, &cause.subject, &cause.details).await? {
            journal::emit_global(
                &mut tx,
                EventKind::AlertOpened,
                &json!({ "alert": id, "rule": cause.rule, "subject": cause.subject, "details": cause.details }),
            )
            .await?;
            opened += 1;
        }
    }
    tx.commit().await?;
    Ok(opened)
}
