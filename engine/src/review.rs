//! The review queue: steps whose outcome is unknown or that wait for a person, oldest
//! uncertainty first, and open integrity incidents. Keyset-paginated on `(unknown_since, id)`,
//! which `step_review_idx` serves.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::{SideEffectContract, StepState};

/// One step in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRow {
    pub step_id: Uuid,
    pub workflow_id: Uuid,
    pub creation_key: String,
    pub logical: String,
    pub state: StepState,
    pub adapter: Option<String>,
    /// The adapter's capabilities in a few words.
    pub capabilities: String,
    pub unknown_since: DateTime<Utc>,
    pub attempts: i32,
    pub request_key: Option<String>,
    pub open_incident: bool,
}

/// One open integrity incident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentRow {
    pub incident_id: Uuid,
    pub step_id: Uuid,
    pub workflow_id: Uuid,
    pub creation_key: String,
    pub kind: String,
    pub opened_at: DateTime<Utc>,
    pub references: Vec<String>,
}

/// Up to `limit` queue rows after the keyset position `after`, oldest uncertainty first.
pub async fn queue(
    pool: &PgPool,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> sqlx::Result<Vec<QueueRow>> {
    let (after_at, after_id) = after.unzip();
    let rows = sqlx::query!(
        r#"select s.id, s.workflow_id, w.creation_key, s.logical, s.state as "state: StepState",
                  s.adapter, a.contract as "contract?", s.unknown_since as "unknown_since!: DateTime<Utc>",
                  s.attempt_count, s.request_key,
                  exists(select 1 from integrity_incident i where i.step_id = s.id and i.resolved_at is null) as "open_incident!"
           from step s
           join workflow w on w.id = s.workflow_id
           left join adapter a on a.name = s.adapter
           where s.state in ('outcome_unknown', 'review_required')
             and ($1::timestamptz is null or (s.unknown_since, s.id) > ($1, $2::uuid))
           order by s.unknown_since, s.id
           limit $3"#,
        after_at as Option<DateTime<Utc>>,
        after_id,
        limit,
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| QueueRow {
            step_id: r.id,
            workflow_id: r.workflow_id,
            creation_key: r.creation_key,
            logical: r.logical,
            state: r.state,
            adapter: r.adapter,
            capabilities: r
                .contract
                .and_then(|c| serde_json::from_value::<SideEffectContract>(c).ok())
                .map(|c| c.capabilities_summary())
                .unwrap_or_default(),
            unknown_since: r.unknown_since,
            attempts: r.attempt_count,
            request_key: r.request_key,
            open_incident: r.open_incident,
        })
        .collect())
}

/// Every open integrity incident, oldest first, with the references it concerns.
pub async fn open_incidents(pool: &PgPool, limit: i64) -> sqlx::Result<Vec<IncidentRow>> {
    let rows = sqlx::query!(
        r#"select i.id, i.step_id, s.workflow_id, w.creation_key, i.kind::text as "kind!",
                  i.opened_at as "opened_at: DateTime<Utc>",
                  coalesce(array_agg(r.external_reference order by r.observed_at)
                           filter (where r.external_reference is not null), '{}') as "references!"
           from integrity_incident i
           join step s on s.id = i.step_id
           join workflow w on w.id = s.workflow_id
           left join incident_reference r on r.incident_id = i.id
           where i.resolved_at is null
           group by i.id, s.workflow_id, w.creation_key
           order by i.opened_at, i.id
           limit $1"#,
        limit
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| IncidentRow {
            incident_id: r.id,
            step_id: r.step_id,
            workflow_id: r.workflow_id,
            creation_key: r.creation_key,
            kind: r.kind,
            opened_at: r.opened_at,
            references: r.references,
        })
        .collect())
}
