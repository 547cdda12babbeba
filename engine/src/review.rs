//! The review queue: steps whose outcome is unknown or that wait for a person (review
//! required, or rejected and waiting to be replaced), oldest uncertainty first, and open integrity incidents. Keyset-paginated on `(unknown_since, id)`,
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

/// Which queue rows to show; every field narrows, `None` does not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueFilter {
    pub state: Option<StepState>,
    pub adapter: Option<String>,
    pub definition: Option<String>,
    /// Only rows whose uncertainty is older than this many seconds.
    pub older_than_secs: Option<i64>,
}

/// Up to `limit` queue rows matching `filter` after the keyset position `after`, oldest
/// uncertainty first.
pub async fn queue(
    pool: &PgPool,
    filter: &QueueFilter,
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
           where s.state in ('outcome_unknown', 'review_required', 'rejected')
             and not exists (select 1 from step r where r.replaces_step_id = s.id)
             and ($1::timestamptz is null or (s.unknown_since, s.id) > ($1, $2::uuid))
             and ($4::step_state is null or s.state = $4)
             and ($5::text is null or s.adapter = $5)
             and ($6::text is null or w.definition_name = $6)
             and ($7::bigint is null or s.unknown_since < now() - make_interval(secs => $7::bigint))
           order by s.unknown_since, s.id
           limit $3"#,
        after_at as Option<DateTime<Utc>>,
        after_id,
        limit,
        filter.state as Option<StepState>,
        filter.adapter,
        filter.definition,
        filter.older_than_secs,
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

/// How many steps wait in the queue, by state and by adapter (before any filter).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounts {
    pub by_state: Vec<(StepState, i64)>,
    pub by_adapter: Vec<(String, i64)>,
}

/// The queue's counts, from `step_waiting_counts_idx` alone, less the rejected steps that
/// were replaced (found through `step_replaced_once_idx`: there are few).
pub async fn queue_counts(pool: &PgPool) -> sqlx::Result<QueueCounts> {
    let rows = sqlx::query!(
        r#"select state as "state!: StepState", adapter as "adapter!", sum(n)::bigint as "n!"
           from (select state, coalesce(adapter, '') as adapter, count(*) as n from step
                 where state in ('outcome_unknown', 'review_required', 'rejected')
                 group by 1, 2
                 union all
                 select o.state, coalesce(o.adapter, ''), -count(*) from step r
                 join step o on o.id = r.replaces_step_id
                 where o.state = 'rejected'
                 group by 1, 2) t
           group by 1, 2
           having sum(n) > 0"#
    )
    .fetch_all(pool)
    .await?;
    let mut counts = QueueCounts::default();
    for r in rows {
        match counts.by_adapter.iter_mut().find(|(k, _)| *k == r.adapter) {
            Some((_, n)) => *n += r.n,
            None => counts.by_adapter.push((r.adapter.clone(), r.n)),
        }
        match counts.by_state.iter_mut().find(|(k, _)| *k == r.state) {
            Some((_, n)) => *n += r.n,
            None => counts.by_state.push((r.state, r.n)),
        }
    }
    counts.by_state.sort();
    counts.by_adapter.sort();
    Ok(counts)
}

/// One external step of a workflow found by search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchRow {
    pub step_id: Uuid,
    pub workflow_id: Uuid,
    pub creation_key: String,
    pub logical: String,
    pub state: StepState,
    pub adapter: Option<String>,
    pub request_key: Option<String>,
    pub external_reference: Option<String>,
}

/// The external steps of every workflow that `text` names: a workflow id, a creation key, a
/// request key, or an external reference (on a receipt or an incident). Each is an index
/// lookup.
pub async fn search(pool: &PgPool, text: &str, limit: i64) -> sqlx::Result<Vec<SearchRow>> {
    let text = text.trim();
    let id = Uuid::parse_str(text).ok();
    sqlx::query_as!(
        SearchRow,
        r#"with hits as (
               select w.id from workflow w where w.creation_key = $1 or w.id = $2
               union select s.workflow_id from step s where s.request_key = $1
               union select r.workflow_id from receipt r where r.external_reference = $1
               union select s.workflow_id from incident_reference ir
                     join integrity_incident i on i.id = ir.incident_id
                     join step s on s.id = i.step_id
                     where ir.external_reference = $1
           )
           select s.id as step_id, s.workflow_id, w.creation_key, s.logical,
                  s.state as "state: StepState", s.adapter, s.request_key,
                  r.external_reference as "external_reference?"
           from hits
           join workflow w on w.id = hits.id
           join step s on s.workflow_id = w.id and s.kind <> 'pure'
           left join receipt r on r.id = s.receipt_id
           order by w.created_at, s.created_at
           limit $3"#,
        text,
        id,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// Every open integrity incident, oldest first, with the references it concerns.
pub async fn open_incidents(pool: &PgPool, limit: i64) -> sqlx::Result<Vec<IncidentRow>> {
    let rows = sqlx::query!(
        r#"select i.id, i.step_id, s.workflow_id, w.creation_key, i.kind::text as "kind!",
                  i.opened_at as "opened_at: DateTime<Utc>",
                  coalesce(array_agg(r.external_reference order by r.observed_at)
                           filter (where r.external_reference is not null), '{}') as "references!"
           from (select * from integrity_incident where resolved_at is null
                 order by opened_at, id limit $1) i
           join step s on s.id = i.step_id
           join workflow w on w.id = s.workflow_id
           left join incident_reference r on r.incident_id = i.id
           group by i.id, i.step_id, i.kind, i.opened_at, s.workflow_id, w.creation_key
           order by i.opened_at, i.id"#,
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
    /// The step's version (its last change); action forms carry it back.
    pub version: i64,
    /// Until when a worker (or an operator's lookup) holds the step.
    pub leased_until: Option<DateTime<Utc>>,
    pub request_prepared: bool,
    /// The normalized input the step runs on, and its digest (a replacement's may be corrected).
    pub input: serde_json::Value,
    pub step_input_digest: String,
    /// Lineage: the step this one replaces, and the step that replaced it.
    pub replaces: Option<Uuid>,
    pub replaced_by: Option<Uuid>,
    /// For a compensation step: the external reference it withdraws.
    pub withdraws: Option<String>,
    /// Every integrity incident of this step, open ones first.
    pub incidents: Vec<Uuid>,
    /// The workflow's other steps: id, logical name, generation, state.
    pub siblings: Vec<(Uuid, String, i32, StepState)>,
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
    let mut conn = pool.acquire().await?;
    let facts = crate::operate::facts(&mut conn, id, false)
        .await?
        .ok_or(sqlx::Error::RowNotFound)?;
    drop(conn);
    let lineage = sqlx::query!(
        r#"select coalesce(s.input, w.input) as "input!", coalesce(s.input_digest, w.input_digest) as "digest!",
                  s.replaces_step_id, (select r.id from step r where r.replaces_step_id = s.id) as replaced_by,
                  (select c.external_reference from compensation_link c where c.compensation_step_id = s.id) as withdraws,
                  coalesce((select array_agg(i.id order by i.resolved_at desc nulls first, i.opened_at)
                            from integrity_incident i where i.step_id = s.id), '{}') as "incidents!"
           from step s join workflow w on w.id = s.workflow_id where s.id = $1"#,
        id
    )
    .fetch_one(pool)
    .await?;
    let siblings = sqlx::query!(
        r#"select id, logical, generation, state as "state: StepState" from step
           where workflow_id = $1 and id <> $2 order by created_at, generation"#,
        s.workflow_id,
        id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.id, r.logical, r.generation, r.state))
    .collect();
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
        last_lookup: facts.last_lookup,
        open_incident: s.open_incident,
        version: facts.version,
        leased_until: facts.leased_until,
        request_prepared: facts.request_prepared,
        input: lineage.input,
        step_input_digest: lineage.digest,
        replaces: lineage.replaces_step_id,
        replaced_by: lineage.replaced_by,
        withdraws: lineage.withdraws,
        incidents: lineage.incidents,
        siblings,
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
            looked_after_sent_ms: after,
        },
        "found_with_conflicting_digest" => LookupAnswer::Found {
            external_reference: seen["external_reference"].as_str()?.to_owned(),
            digest_matches: false,
            looked_after_sent_ms: after,
        },
        "not_found" => LookupAnswer::NotFound {
            looked_after_sent_ms: after,
        },
        "processing" => LookupAnswer::Processing,
        _ => LookupAnswer::Unavailable,
    })
}

/// One external reference an incident concerns, with what was observed about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentReference {
    pub external_reference: String,
    pub request_key: Option<String>,
    pub evidence: serde_json::Value,
    pub observed_at: DateTime<Utc>,
    /// The step's receipt names this reference.
    pub on_receipt: bool,
}

/// How an incident was resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    pub canonical_reference: String,
    pub disposition: String,
    pub resolved_by: String,
    pub resolved_at: DateTime<Utc>,
    pub reason: String,
}

/// Everything the incident page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentDetail {
    pub id: Uuid,
    pub kind: String,
    pub opened_at: DateTime<Utc>,
    pub step_id: Uuid,
    pub workflow_id: Uuid,
    pub creation_key: String,
    pub logical: String,
    pub adapter: Option<String>,
    pub request_key: Option<String>,
    pub references: Vec<IncidentReference>,
    pub resolution: Option<Resolution>,
    /// Compensation steps asking to withdraw a duplicate: id, reference, state.
    pub withdrawals: Vec<(Uuid, String, StepState)>,
    /// Whether the adapter can withdraw a delivery at all.
    pub withdrawable: bool,
}

/// The incident `id`, or `None`.
pub async fn incident(pool: &PgPool, id: Uuid) -> sqlx::Result<Option<IncidentDetail>> {
    let Some(i) = sqlx::query!(
        r#"select i.id, i.kind::text as "kind!", i.opened_at as "opened_at: DateTime<Utc>", i.step_id,
                  s.workflow_id, w.creation_key, s.logical, s.adapter, s.request_key,
                  a.contract as "contract?", rc.external_reference as "receipt_reference?",
                  i.canonical_reference, i.disposition::text as disposition, i.resolved_by,
                  i.resolved_at as "resolved_at: DateTime<Utc>", i.resolution_reason
           from integrity_incident i
           join step s on s.id = i.step_id
           join workflow w on w.id = s.workflow_id
           left join adapter a on a.name = s.adapter
           left join receipt rc on rc.id = s.receipt_id
           where i.id = $1"#,
        id
    )
    .fetch_optional(pool)
    .await?
    else {
        return Ok(None);
    };
    let references = sqlx::query!(
        r#"select external_reference, request_key, evidence, observed_at as "observed_at: DateTime<Utc>"
           from incident_reference where incident_id = $1 order by observed_at, external_reference"#,
        id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| IncidentReference {
        on_receipt: i.receipt_reference.as_deref() == Some(r.external_reference.as_str()),
        external_reference: r.external_reference,
        request_key: r.request_key,
        evidence: r.evidence,
        observed_at: r.observed_at,
    })
    .collect();
    let withdrawals = sqlx::query!(
        r#"select c.compensation_step_id, c.external_reference, s.state as "state: StepState"
           from compensation_link c join step s on s.id = c.compensation_step_id
           where c.incident_id = $1 order by s.created_at"#,
        id
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.compensation_step_id, r.external_reference, r.state))
    .collect();
    let contract = i
        .contract
        .and_then(|c| serde_json::from_value::<SideEffectContract>(c).ok());
    Ok(Some(IncidentDetail {
        id: i.id,
        kind: i.kind,
        opened_at: i.opened_at,
        step_id: i.step_id,
        workflow_id: i.workflow_id,
        creation_key: i.creation_key,
        logical: i.logical,
        adapter: i.adapter,
        request_key: i.request_key,
        references,
        resolution: match (
            i.canonical_reference,
            i.disposition,
            i.resolved_by,
            i.resolved_at,
            i.resolution_reason,
        ) {
            (
                Some(canonical_reference),
                Some(disposition),
                Some(resolved_by),
                Some(resolved_at),
                Some(reason),
            ) => Some(Resolution {
                canonical_reference,
                disposition,
                resolved_by,
                resolved_at,
                reason,
            }),
            _ => None,
        },
        withdrawals,
        withdrawable: contract.is_some_and(|c| {
            matches!(
                c.compensation,
                crate::domain::Compensation::SupportedWithLimits(_)
            )
        }),
    }))
}

/// What the overview charts: step states per logical step, duplicate incidents, and how long
/// the waiting steps have waited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeStats {
    /// (logical step, state, steps).
    pub by_step: Vec<(String, StepState, i64)>,
    pub duplicates_open: i64,
    pub duplicates_resolved: i64,
    /// Waiting steps by age: under a minute, under 10 min, under an hour, under a day, older.
    pub unknown_age: [i64; 5],
}

/// The overview's figures, read from durable state.
pub async fn outcome_stats(pool: &PgPool) -> sqlx::Result<OutcomeStats> {
    let by_step = sqlx::query!(
        r#"select logical, state as "state: StepState", count(*) as "n!"
           from step group by 1, 2 order by 1, 2"#
    )
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|r| (r.logical, r.state, r.n))
    .collect();
    let incidents = sqlx::query!(
        r#"select count(*) filter (where resolved_at is null) as "open!",
                  count(*) filter (where resolved_at is not null) as "resolved!"
           from integrity_incident where kind = 'duplicate_effect'"#
    )
    .fetch_one(pool)
    .await?;
    let ages = sqlx::query!(
        r#"select count(*) filter (where age < interval '1 minute') as "a!",
                  count(*) filter (where age >= interval '1 minute' and age < interval '10 minutes') as "b!",
                  count(*) filter (where age >= interval '10 minutes' and age < interval '1 hour') as "c!",
                  count(*) filter (where age >= interval '1 hour' and age < interval '1 day') as "d!",
                  count(*) filter (where age >= interval '1 day') as "e!"
           from (select now() - unknown_since as age from step
                 where state in ('outcome_unknown', 'review_required', 'rejected')) w"#
    )
    .fetch_one(pool)
    .await?;
    Ok(OutcomeStats {
        by_step,
        duplicates_open: incidents.open,
        duplicates_resolved: incidents.resolved,
        unknown_age: [ages.a, ages.b, ages.c, ages.d, ages.e],
    })
}
