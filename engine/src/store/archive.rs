//! The archiver's statements (docs/DESIGN.md §21): which settled workflows may leave, their
//! evidence as one JSON document each, their tombstones, and the removal itself (a function
//! the schema's owner runs, so the application role holds no DELETE on the append-only tables).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::WorkflowState;

/// The one lock the archiver's batches take, across every process on the database.
const ARCHIVER_LOCK: i64 = 0x5a29_c0a2;

/// Where one turn of the archiver walks from: workflows settled after this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Walked {
    pub settled_at: Option<DateTime<Utc>>,
    pub id: Uuid,
}

/// Takes the archiver's lock for this transaction; false: another process holds it.
pub async fn take_turn(conn: &mut PgConnection) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"select pg_try_advisory_xact_lock($1) as "taken!""#,
        ARCHIVER_LOCK
    )
    .fetch_one(conn)
    .await
}

/// Up to `most` workflows that may leave the hot tables now, oldest settled first, after
/// `from`, locked: settled longer ago than their definition's retention (else `default_secs`),
/// no step in flight, leased or in review, no open incident, no run of a bulk action still
/// to reach them, every event of theirs published, and no request key still inside its
/// adapter's idempotency retention.
pub async fn eligible(
    conn: &mut PgConnection,
    default_secs: f64,
    from: Walked,
    most: i64,
) -> sqlx::Result<Vec<(Uuid, DateTime<Utc>, f64)>> {
    let rows = sqlx::query!(
        r#"with bound as (
               select now() - make_interval(secs => least($1::float8, coalesce(min(extract(epoch from retain_settled))::float8, $1))) as settled_before,
                      (select coalesce(min(o.created_at), now()) from outbox o, outbox_cursor c
                       where c.reader = 'publisher' and (o.txid, o.id) > (c.txid, c.id)) as published_before
               from definition)
           select w.id, w.settled_at as "settled_at!: DateTime<Utc>",
                  extract(epoch from now() - w.settled_at
                          - coalesce(d.retain_settled, make_interval(secs => $1)))::float8 as "lag!"
           from bound b, workflow w
           join definition d on d.name = w.definition_name and d.version = w.definition_version
           where w.settled_at is not null
             and w.settled_at < b.settled_before
             and w.settled_at < b.published_before
             and ($2::timestamptz is null or (w.settled_at, w.id) > ($2, $3))
             and w.state in ('completed', 'cancelled')
             and w.settled_at < now() - coalesce(d.retain_settled, make_interval(secs => $1))
             and not exists (select 1 from step s where s.workflow_id = w.id
                             and (s.lease_id is not null or s.waiting is not null
                                  or s.state in ('ready', 'held', 'running', 'invoking',
                                                 'outcome_unknown', 'review_required')))
             and not exists (select 1 from step s join integrity_incident i on i.step_id = s.id
                             where s.workflow_id = w.id and i.resolved_at is null)
             and not exists (select 1 from step s join bulk_item b on b.step_id = s.id
                             where s.workflow_id = w.id and b.outcome is null)
             and not exists (select 1 from step s
                             join external_request q on q.step_id = s.id
                             join adapter a on a.name = q.adapter
                             where s.workflow_id = w.id
                               and coalesce(q.last_sent_at, q.first_sent_at) is not null
                               and coalesce(q.last_sent_at, q.first_sent_at)
                                   + make_interval(secs => (a.declared->>'idempotency_retention_ms')::float8 / 1000)
                                   > now())
           order by w.settled_at, w.id
           limit $4
           for update of w skip locked"#,
        default_secs,
        from.settled_at as _,
        from.id,
        most,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.settled_at, r.lag))
        .collect())
}

/// Each workflow's whole evidence, as one JSON document: the workflow row and every row of
/// every table that names it or its steps, as stored (new columns join the record by
/// themselves). In the order of `ids`.
pub async fn evidence(conn: &mut PgConnection, ids: &[Uuid]) -> sqlx::Result<Vec<(Uuid, Value)>> {
    let rows = sqlx::query!(
        r#"select w.id, jsonb_build_object(
               'workflow', to_jsonb(w),
               'status', (select to_jsonb(p) from status_projection p where p.workflow_id = w.id),
               'steps', (select coalesce(jsonb_agg(to_jsonb(s) order by s.created_at, s.id), '[]')
                         from step s where s.workflow_id = w.id),
               'requests', (select coalesce(jsonb_agg(to_jsonb(q) order by q.prepared_at), '[]')
                            from external_request q join step s on s.id = q.step_id
                            where s.workflow_id = w.id),
               'attempts', (select coalesce(jsonb_agg(to_jsonb(a) order by a.started_at, a.id), '[]')
                            from attempt_start a join step s on s.id = a.step_id
                            where s.workflow_id = w.id),
               'observations', (select coalesce(jsonb_agg(to_jsonb(o) order by o.id), '[]')
                                from observation o join step s on s.id = o.step_id
                                where s.workflow_id = w.id),
               'receipts', (select coalesce(jsonb_agg(to_jsonb(r) order by r.created_at, r.id), '[]')
                            from receipt r join step s on s.id = r.step_id
                            where s.workflow_id = w.id),
               'waivers', (select coalesce(jsonb_agg(to_jsonb(v) order by v.created_at), '[]')
                           from waiver v join step s on s.id = v.step_id where s.workflow_id = w.id),
               'authorizations', (select coalesce(jsonb_agg(to_jsonb(z) order by z.created_at), '[]')
                                  from operator_authorization z join step s on s.id = z.step_id
                                  where s.workflow_id = w.id),
               'proposals', (select coalesce(jsonb_agg(to_jsonb(x) order by x.proposed_at), '[]')
                             from proposal x join step s on s.id = x.step_id where s.workflow_id = w.id),
               'incidents', (select coalesce(jsonb_agg(to_jsonb(i) || jsonb_build_object('references',
                                 (select coalesce(jsonb_agg(to_jsonb(f) order by f.observed_at), '[]')
                                  from incident_reference f where f.incident_id = i.id))
                                 order by i.opened_at), '[]')
                             from integrity_incident i join step s on s.id = i.step_id
                             where s.workflow_id = w.id),
               'compensation', (select coalesce(jsonb_agg(to_jsonb(c)), '[]')
                                from compensation_link c join step s on s.id = c.original_step_id
                                where s.workflow_id = w.id),
               'audit', (select coalesce(jsonb_agg(to_jsonb(e) order by e.id), '[]')
                         from audit e
                         where e.workflow_id = w.id
                            or e.step_id in (select s.id from step s where s.workflow_id = w.id))
           ) as "record!"
           from unnest($1::uuid[]) with ordinality as i(id, n)
           join workflow w on w.id = i.id
           order by i.n"#,
        ids,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.record)).collect())
}

/// Where a batch's records landed.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub file: &'a str,
    pub offset: i64,
    pub length: i64,
}

/// Writes the tombstones of `ids` (their records are durable at `place`), then removes every
/// row of theirs (`z29c_archive_workflows`, the schema owner's function); returns how many
/// workflows left.
pub async fn leave(conn: &mut PgConnection, ids: &[Uuid], place: Place<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"select z29c_archive_workflows($1, $2, $3, $4) as "removed!""#,
        ids,
        place.file,
        place.offset,
        place.length,
    )
    .fetch_one(conn)
    .await
}

/// Up to `most` audit entries naming no workflow older than `retain_secs`, oldest first, as
/// stored. Not locked: an audit entry never changes, the archiver's lock keeps a second archiver
/// away, and the role Z29C runs as may not lock what it may not update.
pub async fn old_audit(
    conn: &mut PgConnection,
    retain_secs: f64,
    most: i64,
) -> sqlx::Result<Vec<(i64, Value)>> {
    let rows = sqlx::query!(
        r#"select e.id, to_jsonb(e) as "entry!" from audit e
           where e.workflow_id is null and e.step_id is null
             and e.at < now() - make_interval(secs => $1)
           order by e.at, e.id limit $2"#,
        retain_secs,
        most,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.entry)).collect())
}

/// Removes audit entries already archived.
pub async fn remove_audit(conn: &mut PgConnection, ids: &[i64]) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"select z29c_remove_archived_audit($1) as "removed!""#,
        ids
    )
    .fetch_one(conn)
    .await
}

/// Deletes up to `most` events every consumer has passed, older than `retain_secs`.
pub async fn prune_events(
    conn: &mut PgConnection,
    retain_secs: f64,
    most: i32,
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"select z29c_prune_outbox(now() - make_interval(secs => $1), $2) as "removed!""#,
        retain_secs,
        most,
    )
    .fetch_one(conn)
    .await
}

/// Adds one batch to the archiver's totals.
pub async fn count(
    conn: &mut PgConnection,
    (workflows, audit, events, bytes): (i64, i64, i64, i64),
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update archive_progress
           set workflows = workflows + $1, audit_entries = audit_entries + $2,
               events = events + $3, bytes = bytes + $4"#,
        workflows,
        audit,
        events,
        bytes,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Every member tombstones point at, and how many point at each: file, offset, length, count.
pub async fn members(pool: &sqlx::PgPool) -> sqlx::Result<Vec<(String, i64, i64, i64)>> {
    let rows = sqlx::query!(
        r#"select archive_file, member_offset, member_length, count(*) as "tombstones!"
           from archived_workflow group by 1, 2, 3 order by 1, 2"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                r.archive_file,
                r.member_offset,
                r.member_length,
                r.tombstones,
            )
        })
        .collect())
}

/// The archiver's totals: workflows, audit entries, events, bytes, when its last turn ended
/// and how long it took.
pub type Progress = (i64, i64, i64, i64, Option<DateTime<Utc>>, f64);

/// The archiver's totals.
pub async fn progress(conn: &mut PgConnection) -> sqlx::Result<Progress> {
    let row = sqlx::query!(
        r#"select workflows, audit_entries, events, bytes,
                  last_turn_at as "last_turn_at: DateTime<Utc>", last_turn_secs
           from archive_progress"#
    )
    .fetch_one(conn)
    .await?;
    Ok((
        row.workflows,
        row.audit_entries,
        row.events,
        row.bytes,
        row.last_turn_at,
        row.last_turn_secs,
    ))
}

/// How long ago the oldest settled workflow still in the hot tables settled.
pub async fn oldest_settled_age_secs(conn: &mut PgConnection) -> sqlx::Result<Option<f64>> {
    sqlx::query_scalar!(
        r#"select extract(epoch from now() - min(settled_at))::float8 as "age"
           from workflow where settled_at is not null"#
    )
    .fetch_one(conn)
    .await
}

/// Notes that a turn ended, and how long it took.
pub async fn turn_ended(conn: &mut PgConnection, secs: f64) -> sqlx::Result<()> {
    sqlx::query!(
        "update archive_progress set last_turn_at = now(), last_turn_secs = $1",
        secs
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// An archived workflow's tombstone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Tombstone {
    pub id: Uuid,
    pub creation_key: String,
    pub definition_name: String,
    pub definition_version: i32,
    pub state: WorkflowState,
    pub input_digest: String,
    pub created_at: DateTime<Utc>,
    pub settled_at: DateTime<Utc>,
    pub archived_at: DateTime<Utc>,
    pub request_keys: Vec<String>,
    pub external_references: Vec<String>,
    pub archive_file: String,
    pub member_offset: i64,
    pub member_length: i64,
}

/// The tombstone of the workflow `id`, or of the one `creation_key` started, if it was
/// archived.
pub async fn tombstone<'e, E>(
    executor: E,
    id: Option<Uuid>,
    creation_key: Option<&str>,
) -> sqlx::Result<Option<Tombstone>>
where
    E: sqlx::Executor<'e, Database = sqlx::Postgres>,
{
    sqlx::query_as!(
        Tombstone,
        r#"select id, creation_key, definition_name, definition_version,
                  state as "state: WorkflowState", input_digest,
                  created_at as "created_at: DateTime<Utc>", settled_at as "settled_at: DateTime<Utc>",
                  archived_at as "archived_at: DateTime<Utc>", request_keys, external_references,
                  archive_file, member_offset, member_length
           from archived_workflow where id = $1 or creation_key = $2"#,
        id,
        creation_key,
    )
    .fetch_optional(executor)
    .await
}

/// The member holding the newest tombstone's record (file, offset): the last batch a restored
/// database knows it archived. Batches run one at a time, so every record of an earlier member
/// is of a workflow the database holds, hot or as a tombstone.
pub async fn newest_member(conn: &mut PgConnection) -> sqlx::Result<Option<(String, i64)>> {
    let row = sqlx::query!(
        "select archive_file, member_offset from archived_workflow order by archived_at desc limit 1"
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.archive_file, r.member_offset)))
}

/// Writes `tombstones` (rebuilt from their records) where neither the workflow's id nor its
/// creation key is in the hot tables or another tombstone; returns the ids written. Only the
/// schema's owner may.
pub async fn restore_tombstones(
    conn: &mut PgConnection,
    tombstones: &[Tombstone],
) -> sqlx::Result<Vec<Uuid>> {
    let rows = sqlx::types::Json(tombstones);
    sqlx::query_scalar!(
        r#"insert into archived_workflow
           select t.* from jsonb_populate_recordset(null::archived_workflow, $1) t
           where not exists (select 1 from workflow w
                             where w.id = t.id or w.creation_key = t.creation_key)
           on conflict do nothing
           returning id"#,
        rows as _,
    )
    .fetch_all(conn)
    .await
}

/// Of the workflows `ids` (started under `creation_keys`), those the hot tables hold, each with
/// whether it is that workflow (`true`) or another one started under its creation key.
pub async fn hot_or_key_taken(
    conn: &mut PgConnection,
    ids: &[Uuid],
    creation_keys: &[String],
) -> sqlx::Result<Vec<(Uuid, bool)>> {
    let rows = sqlx::query!(
        r#"select t.id as "id!", w.id = t.id as "same!"
           from unnest($1::uuid[], $2::text[]) as t(id, creation_key)
           join workflow w on w.id = t.id or w.creation_key = t.creation_key"#,
        ids,
        creation_keys,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.same)).collect())
}

/// Notes where the archive keeps a later copy of each workflow of `copies` the hot tables hold
/// again after a restore (docs/DESIGN.md §21, "After a restore"), keeping the latest copy of
/// each. Only the schema's owner may.
pub async fn note_copies(conn: &mut PgConnection, copies: &[&Tombstone]) -> sqlx::Result<()> {
    let rows = sqlx::types::Json(copies);
    sqlx::query!(
        r#"insert into archived_copy
               (workflow_id, archived_at, archive_file, member_offset, member_length)
           select t.id, t.archived_at, t.archive_file, t.member_offset, t.member_length
           from jsonb_populate_recordset(null::archived_workflow, $1) t
           where exists (select 1 from workflow w where w.id = t.id)
           on conflict (workflow_id) do update
              set archived_at = excluded.archived_at, archive_file = excluded.archive_file,
                  member_offset = excluded.member_offset, member_length = excluded.member_length,
                  noted_at = now()
            where archived_copy.archived_at <= excluded.archived_at"#,
        rows as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Where the archive keeps a copy of hot workflow `id`, if reconciling noted one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyPlace {
    pub archived_at: DateTime<Utc>,
    pub archive_file: String,
    pub member_offset: i64,
    pub member_length: i64,
}

/// Where the archive keeps a copy of hot workflow `id`, if reconciling noted one.
pub async fn copy_place<'e, E>(executor: E, id: Uuid) -> sqlx::Result<Option<CopyPlace>>
where
    E: sqlx::Executor<'e, Database = sqlx::Postgres>,
{
    sqlx::query_as!(
        CopyPlace,
        r#"select archived_at as "archived_at: DateTime<Utc>", archive_file, member_offset,
                  member_length
           from archived_copy where workflow_id = $1"#,
        id
    )
    .fetch_optional(executor)
    .await
}
