//! Breakers (docs/DESIGN.md §20): an adapter file may declare that its adapter is held
//! automatically when its provider is in trouble — after `trips_after` attempts ended outcome
//! unknown or with a 5xx answer within `within`. The hold is an ordinary one, by `breaker`, with
//! the attempts that tripped it as its evidence; an alert stays open while it stands, and only a
//! person resumes it. Any process may run this: the hold is taken by one conditional update.

use serde_json::json;
use sqlx::PgPool;

use crate::adapter::AdapterSpec;
use crate::domain::AuditAction;
use crate::store::hold::{self, AdapterHold};
use crate::store::journal::{self, Actor};
use crate::store::{adapter, breaker};

/// How many of the attempts that tripped a breaker its hold keeps as evidence.
const EVIDENCE_KEPT: usize = 20;

/// Holds every adapter whose breaker's threshold is reached now; returns the holds it took.
pub async fn trip_breakers(pool: &PgPool) -> sqlx::Result<Vec<AdapterHold>> {
    let held: Vec<String> = hold::all(pool)
        .await?
        .into_iter()
        .map(|h| h.adapter)
        .collect();
    let mut tripped = Vec::new();
    for row in adapter::all(pool).await? {
        let breaker = match row.source.as_deref().map(AdapterSpec::parse) {
            Some(Ok(spec)) => spec.breaker,
            _ => None,
        };
        let Some(breaker) = breaker.filter(|_| !held.contains(&row.name)) else {
            continue;
        };
        let window = breaker.within.0;
        let troubled = breaker::trouble(
            pool,
            &row.name,
            window.as_secs_f64(),
            i64::from(breaker.trips_after),
        )
        .await?;
        if troubled.len() < breaker.trips_after as usize {
            continue;
        }
        let reason = format!(
            "Breaker: {} attempts ended outcome unknown or with a 5xx answer within {}s",
            troubled.len(),
            window.as_secs()
        );
        let evidence = json!(troubled.iter().take(EVIDENCE_KEPT).collect::<Vec<_>>());
        let mut tx = pool.begin().await?;
        if let Some(taken) = hold::trip(&mut tx, &row.name, &reason, &evidence).await? {
            let details =
                json!({ "adapter": row.name, "holds_lookups": true, "tripped_by": evidence });
            let actor = Actor::Engine("breaker");
            journal::audit_unattached(
                &mut tx,
                actor,
                AuditAction::AdapterHold,
                Some(&reason),
                details,
            )
            .await?;
            tracing::warn!(adapter = %row.name, %reason, "breaker tripped: the adapter is held");
            tripped.push(taken);
        }
        tx.commit().await?;
    }
    Ok(tripped)
}
