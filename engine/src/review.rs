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

/// Everything known about one step, evidence first: what the console's step page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub step_id: Uuid,
    pub workflow_id: Uuid,
    pub creation_key: String,
    pub logical: String,
    pub definition_version: i32,
    pub state: StepState,
    pub adapter: Option<String>,
    pub contract: Option<SideEffectContract>,
    pub document_digest: Option<String>,
    pub request_key: Option<String>,
    pub input_digest: Option<String>,
    pub request_summary: Option<serde_json::Value>,
    pub first_sent_at: Option<DateTime<Utc>>,
    pub last_sent_at: Option<DateTime<Utc>>,
    pub unknown_since: Option<DateTime<Utc>>,
    pub receipt: Option<(String, String, DateTime<Utc>)>,
    pub attempts: Vec<AttemptEvidence>,
    pub timeline: Vec<TimelineEntry>,
    pub last_lookup: Option<crate::domain::LookupAnswer>,
    pub open_incident: bool,
}

/// One attempt, never overwritten.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptEvidence {
    pub number: i32,
    pub id: Uuid,
    pub worker: String,
    pub lease_expires_at: DateTime<Utc>,
    pub started_at: DateTime<Utc>,
    pub invoked_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub outcome: Option<crate::domain::AttemptOutcome>,
    pub observation: Option<String>,
}

/// An observation or an audit entry, in time order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub at: DateTime<Utc>,
    pub what: String,
    pub detail: String,
}

/// The evidence of step `id`, or `None` when there is no such step.
pub async fn evidence(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<Evidence>> {
    let Some(s) = sqlx::query!(
        r#"select s.id, s.workflow_id, w.creation_key, s.logical, s.definition_version,
                  s.state as "state: StepState", s.adapter, a.contract as "contract?", s.request_key,
                  s.unknown_since as "unknown_since: DateTime<Utc>",
                  (select r.output ->> 'document_digest' from step r
                    where r.workflow_id = s.workflow_id and r.logical = 'render') as document_digest,
                  q.input_digest as "input_digest?", q.summary as "summary?",
                  q.first_sent_at as "first_sent_at: DateTime<Utc>", q.last_sent_at as "last_sent_at: DateTime<Utc>",
                  rc.method::text as "receipt_method?", rc.external_reference as "receipt_reference?",
                  rc.observed_at as "receipt_at?: DateTime<Utc>",
                  exists(select 1 from integrity_incident i where i.step_id = s.id and i.resolved_at is null) as "open_incident!"
           from step s
           join workflow w on w.id = s.workflow_id
           left join adapter a on a.name = s.adapter
           left join external_request q on q.request_key = s.request_key
           left join receipt rc on rc.id = s.receipt_id
           where s.id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let attempts = sqlx::query!(
        r#"select id, number, worker, lease_expires_at as "lease_expires_at: DateTime<Utc>",
                  started_at as "started_at: DateTime<Utc>", invoked_at as "invoked_at: DateTime<Utc>",
                  ended_at as "ended_at: DateTime<Utc>", outcome as "outcome: crate::domain::AttemptOutcome",
                  observation
           from attempt where step_id = $1 order by number"#,
        id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|a| AttemptEvidence {
        number: a.number,
        id: a.id,
        worker: a.worker,
        lease_expires_at: a.lease_expires_at,
        started_at: a.started_at,
        invoked_at: a.invoked_at,
        ended_at: a.ended_at,
        outcome: a.outcome,
        observation: a
            .observation
            .and_then(|o| serde_json::from_value::<crate::domain::TransportObservation>(o).ok())
            .map(|o| o.describe()),
    })
    .collect();
    let timeline_rows = sqlx::query!(
        r#"select observed_at as "at!: DateTime<Utc>", kind as "what!", body::text as "detail!" from observation where step_id = $1
           union all
           select at, action || ' by ' || actor, coalesce(reason, '') from audit where step_id = $1
           order by 1"#,
        id
    )
    .fetch_all(pool)
    .await?;
    let last_lookup = sqlx::query_scalar!(
        r#"select body from observation where step_id = $1 and kind = 'lookup' order by id desc limit 1"#,
        id
    )
    .fetch_optional(pool)
    .await?
    .and_then(|body| lookup_answer(&body));
    Ok(Some(Evidence {
        step_id: s.id,
        workflow_id: s.workflow_id,
        creation_key: s.creation_key,
        logical: s.logical,
        definition_version: s.definition_version,
        state: s.state,
        adapter: s.adapter,
        contract: s.contract.and_then(|c| serde_json::from_value(c).ok()),
        document_digest: s.document_digest,
        request_key: s.request_key,
        input_digest: s.input_digest,
        request_summary: s.summary,
        first_sent_at: s.first_sent_at,
        last_sent_at: s.last_sent_at,
        unknown_since: s.unknown_since,
        receipt: match (s.receipt_method, s.receipt_reference, s.receipt_at) {
            (Some(m), Some(r), Some(at)) => Some((m, r, at)),
            _ => None,
        },
        attempts,
        timeline: timeline_rows
            .into_iter()
            .map(|t| TimelineEntry {
                at: t.at,
                what: t.what,
                detail: t.detail,
            })
            .collect(),
        last_lookup,
        open_incident: s.open_incident,
    }))
}

/// The decision-table fact a recorded lookup observation stands for.
pub(crate) fn lookup_answer(body: &serde_json::Value) -> Option<crate::domain::LookupAnswer> {
    use crate::domain::LookupAnswer;
    let seen = &body["seen"];
    let after = body["looked_after_sent_ms"].as_u64().unwrap_or(0);
    Some(match seen["seen"].as_str()? {
        "found" => LookupAnswer::Found {
            external_reference: seen["external_reference"].as_str()?.to_owned(),
            digest_matches: true,
        },
        "found_with_conflicting_digest" => LookupAnswer::Found {
            external_reference: seen["external_reference"].as_str()?.to_owned(),
            digest_matches: false,
        },
        "not_found" => LookupAnswer::NotFound {
            looked_after_sent_ms: after,
        },
        "processing" => LookupAnswer::Processing,
        _ => LookupAnswer::Unavailable,
    })
}
