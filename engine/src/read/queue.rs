//! The review queue: steps whose outcome is unknown or that wait for a person (review
//! required, or rejected and waiting to be replaced), oldest uncertainty first, and open
//! integrity incidents. Keyset-paginated on `(unknown_since, id)`, which `step_review_idx`
//! serves. Also the search that finds a workflow's steps by any name people have for it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use super::keyset::Position;
use crate::domain::{IncidentKind, SideEffectContract, StepState};

/// One step in the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueRow {
    pub step_id: Uuid,
    pub workflow_id: Uuid,
    pub creation_key: String,
    pub logical: String,
    pub definition_name: String,
    pub definition_version: i32,
    pub state: StepState,
    pub adapter: Option<String>,
    /// The adapter's capabilities in a few words.
    pub capabilities: String,
    pub unknown_since: DateTime<Utc>,
    pub attempts: i32,
    pub request_key: Option<String>,
    pub open_incident: bool,
    /// When the newest note on the step or its workflow was written, if there is one.
    pub noted_at: Option<DateTime<Utc>>,
}

/// One open integrity incident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentRow {
    pub incident_id: Uuid,
    pub step_id: Uuid,
    pub workflow_id: Uuid,
    pub creation_key: String,
    pub kind: IncidentKind,
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
    /// Only rows with a note (on the step or its workflow) written since then.
    pub noted_since: Option<DateTime<Utc>>,
    /// Only the steps of workflows whose creation key begins with this (a prefixed token's
    /// view: filtered before the page is cut, so its cursor names none of another team's).
    #[serde(default)]
    pub creation_key_prefix: Option<String>,
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
        r#"select s.id, s.workflow_id, w.creation_key, s.logical, w.definition_name,
                  s.definition_version, s.state as "state: StepState",
                  s.adapter, a.contract as "contract?", s.unknown_since as "unknown_since!: DateTime<Utc>",
                  s.attempt_count, s.request_key,
                  exists(select 1 from integrity_incident i where i.step_id = s.id and i.resolved_at is null) as "open_incident!",
                  (select max(n.at) from audit n
                   where n.action = 'note' and n.workflow_id = s.workflow_id
                     and (n.step_id is null or n.step_id = s.id)) as "noted_at: DateTime<Utc>"
           from step s
           join workflow w on w.id = s.workflow_id
           left join adapter a on a.name = s.adapter
           where s.waiting is not null
             and not exists (select 1 from step r where r.replaces_step_id = s.id)
             and ($1::timestamptz is null or (s.unknown_since, s.id) > ($1, $2::uuid))
             and ($4::step_state is null or s.waiting = $4)
             and ($5::text is null or s.adapter = $5)
             and ($6::text is null or w.definition_name = $6)
             and ($7::bigint is null or s.unknown_since < now() - make_interval(secs => $7::bigint))
             and ($8::timestamptz is null
                  or exists (select 1 from audit n
                             where n.action = 'note' and n.workflow_id = s.workflow_id
                               and (n.step_id is null or n.step_id = s.id) and n.at >= $8))
             and ($9::text is null or starts_with(w.creation_key, $9))
           order by s.unknown_since, s.id
           limit $3"#,
        after_at as Option<DateTime<Utc>>,
        after_id,
        limit,
        filter.state as Option<StepState>,
        filter.adapter,
        filter.definition,
        filter.older_than_secs,
        filter.noted_since as Option<DateTime<Utc>>,
        filter.creation_key_prefix,
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
            definition_name: r.definition_name,
            definition_version: r.definition_version,
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
            noted_at: r.noted_at,
        })
        .collect())
}

/// How many steps wait in the queue, by state and by adapter (before any filter).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounts {
    pub by_state: Vec<(StepState, i64)>,
    pub by_adapter: Vec<(String, i64)>,
}

/// The queue's counts: the kept counts plus the changes not yet folded (migration
/// `queue_counts`), so the work is the number of changes since the last fold, whatever the
/// number of steps waiting. Read in one snapshot beside a fold, as `stats::outcome_stats`.
pub async fn queue_counts(pool: &PgPool) -> sqlx::Result<QueueCounts> {
    let ((), rows) = tokio::try_join!(
        crate::read::stats::fold_counts(pool),
        sqlx::query!(
            r#"select state as "state!: StepState", adapter as "adapter!", sum(n)::bigint as "n!"
               from (select state, adapter, n from step_waiting_count
                     union all select state, adapter, n from step_waiting_delta) c
               group by 1, 2
               having sum(n) <> 0"#
        )
        .fetch_all(pool),
    )?;
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

/// Up to `limit` open integrity incidents after the keyset position `after` (opened at, id),
/// oldest first, with the references each concerns; with a prefix, only those of workflows
/// whose creation key starts with it.
pub async fn open_incidents(
    pool: &PgPool,
    limit: i64,
    creation_key_prefix: Option<&str>,
    after: Option<Position>,
) -> sqlx::Result<Vec<IncidentRow>> {
    let (after_at, after_id) = after.unzip();
    let rows = sqlx::query!(
        // References are read per listed incident through their primary key: a join would
        // hash every incident's references, a table that grows with every incident ever opened.
        r#"select o.id, o.step_id, os.workflow_id, ow.creation_key, o.kind as "kind: IncidentKind",
                  o.opened_at as "opened_at: DateTime<Utc>",
                  array(select r.external_reference from incident_reference r
                        where r.incident_id = o.id order by r.observed_at) as "references!"
           from integrity_incident o
           join step os on os.id = o.step_id join workflow ow on ow.id = os.workflow_id
           where o.resolved_at is null
             and ($2::text is null or starts_with(ow.creation_key, $2))
             and ($3::timestamptz is null or (o.opened_at, o.id) > ($3, $4::uuid))
           order by o.opened_at, o.id limit $1"#,
        limit,
        creation_key_prefix,
        after_at as Option<DateTime<Utc>>,
        after_id,
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

/// One page of the open incidents.
#[derive(Debug, Clone, PartialEq)]
pub struct IncidentPage {
    pub rows: Vec<IncidentRow>,
    /// Where the next page starts (the last row's opened at and id), when there is one.
    pub next: Option<Position>,
    /// How many are open in all (of the prefix's workflows, with one).
    pub open: i64,
}

/// Up to `limit` open incidents after `after`, the next page's position and the count, read at
/// once.
pub async fn open_incident_page(
    pool: &PgPool,
    limit: i64,
    creation_key_prefix: Option<&str>,
    after: Option<Position>,
) -> sqlx::Result<IncidentPage> {
    let (mut rows, open) = tokio::try_join!(
        open_incidents(pool, limit + 1, creation_key_prefix, after),
        open_incident_count(pool, creation_key_prefix),
    )?;
    let next = super::keyset::cut(&mut rows, limit, |last| (last.opened_at, last.incident_id));
    Ok(IncidentPage { rows, next, open })
}

/// How many integrity incidents are open; with a prefix, only those of workflows whose
/// creation key starts with it. The work is the open incidents (their partial index), not
/// every incident ever opened.
pub async fn open_incident_count(
    pool: &PgPool,
    creation_key_prefix: Option<&str>,
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"select count(*) as "n!" from integrity_incident o
           where o.resolved_at is null
             and ($1::text is null
                  or exists (select 1 from step s join workflow w on w.id = s.workflow_id
                             where s.id = o.step_id and starts_with(w.creation_key, $1)))"#,
        creation_key_prefix,
    )
    .fetch_one(pool)
    .await
}
