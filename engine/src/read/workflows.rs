//! Workflows listed and searched for the API and the CLI: newest first, filtered by state,
//! definition, adapter, age and the keys a team searches by, a page at a time. Workflow ids are
//! UUIDv7, so the primary key orders them by creation and a page continues after the last id
//! of the one before (keyset pagination: no offset, the same cost on page 1 and page 10,000).
//! A search by creation key, request key or external reference also finds archived workflows
//! by their tombstones (docs/DESIGN.md §21).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::WorkflowState;

/// Which workflows to list; every filter given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowQuery {
    pub state: Option<WorkflowState>,
    /// A definition's name (every version).
    pub definition: Option<String>,
    /// Workflows with a step that calls this adapter.
    pub adapter: Option<String>,
    /// Workflows created before this moment (how an age filter arrives).
    pub created_before: Option<DateTime<Utc>>,
    /// The client's creation key, exactly.
    pub creation_key: Option<String>,
    /// A step's request key, exactly.
    pub request_key: Option<String>,
    /// An external reference on one of the workflow's receipts, exactly.
    pub external_reference: Option<String>,
    /// A creation key, request key or external reference, exactly: any of the three (the
    /// console's one search box).
    pub key: Option<String>,
    /// Only creation keys that start with this (a prefixed token's scope).
    pub creation_key_prefix: Option<String>,
    /// The last id of the previous page.
    pub after: Option<Uuid>,
    /// At most this many rows (1 to [`MAX_PAGE`]).
    pub limit: i64,
}

/// The most rows one page holds.
pub const MAX_PAGE: i64 = 500;

/// One workflow in a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorkflowRow {
    pub id: Uuid,
    pub creation_key: String,
    pub definition: String,
    pub definition_version: i32,
    pub state: WorkflowState,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When it left for the archive; its evidence is read back from there.
    pub archived_at: Option<DateTime<Utc>>,
}

/// One page of workflows and where the next begins (`None` on the last page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorkflowPage {
    pub workflows: Vec<WorkflowRow>,
    /// Pass as `after` for the next page.
    pub next: Option<Uuid>,
}

/// The page of workflows `query` selects, newest first.
pub async fn list(pool: &PgPool, query: &WorkflowQuery) -> sqlx::Result<WorkflowPage> {
    let limit = query.limit.clamp(1, MAX_PAGE);
    let by_key = [
        &query.creation_key,
        &query.request_key,
        &query.external_reference,
        &query.key,
    ];
    let mut workflows = if by_key.iter().any(|k| k.is_some()) {
        let mut found = keyed(pool, query, limit + 1).await?;
        found.extend(archived(pool, query, limit + 1).await?);
        found.sort_by_key(|w| std::cmp::Reverse(w.id));
        found
    } else {
        unkeyed(pool, query, limit + 1).await?
    };
    let next = super::keyset::cut(&mut workflows, limit, |w| w.id);
    Ok(WorkflowPage { workflows, next })
}

/// A page without a key: walked newest first by the primary key.
async fn unkeyed(
    pool: &PgPool,
    query: &WorkflowQuery,
    limit: i64,
) -> sqlx::Result<Vec<WorkflowRow>> {
    sqlx::query_as!(
        WorkflowRow,
        r#"select w.id, w.creation_key, w.definition_name as definition, w.definition_version,
                  w.state as "state: WorkflowState", w.created_at as "created_at: DateTime<Utc>",
                  w.updated_at as "updated_at: DateTime<Utc>",
                  null::timestamptz as "archived_at: DateTime<Utc>"
           from workflow w
           where ($1::uuid is null or w.id < $1)
             and ($2::workflow_state is null or w.state = $2)
             and ($3::text is null or w.definition_name = $3)
             and ($4::text is null
                  or exists (select 1 from step s where s.workflow_id = w.id and s.adapter = $4))
             and ($5::timestamptz is null or w.created_at < $5)
             and ($6::text is null or starts_with(w.creation_key, $6))
           order by w.id desc
           limit $7"#,
        query.after,
        query.state as Option<WorkflowState>,
        query.definition,
        query.adapter,
        query.created_before as _,
        query.creation_key_prefix,
        limit,
    )
    .fetch_all(pool)
    .await
}

/// A search by key: the workflows each key names, found through its own index (creation key,
/// step request key, receipt external reference), then every filter checked on those few. A
/// walk of the primary key probing each workflow for the key, which one statement with every
/// filter optional came to once PostgreSQL chose its generic plan, took 5 s at 1M workflows.
async fn keyed(pool: &PgPool, query: &WorkflowQuery, limit: i64) -> sqlx::Result<Vec<WorkflowRow>> {
    sqlx::query_as!(
        WorkflowRow,
        r#"select w.id, w.creation_key, w.definition_name as definition, w.definition_version,
                  w.state as "state: WorkflowState", w.created_at as "created_at: DateTime<Utc>",
                  w.updated_at as "updated_at: DateTime<Utc>",
                  null::timestamptz as "archived_at: DateTime<Utc>"
           from workflow w
           where w.id in (select k.id from workflow k where k.creation_key in ($6, $11)
                          union all
                          select s.workflow_id from step s where s.request_key in ($7, $11)
                          union all
                          select r.workflow_id from receipt r where r.external_reference in ($8, $11))
             and ($1::uuid is null or w.id < $1)
             and ($2::workflow_state is null or w.state = $2)
             and ($3::text is null or w.definition_name = $3)
             and ($4::text is null
                  or exists (select 1 from step s where s.workflow_id = w.id and s.adapter = $4))
             and ($5::timestamptz is null or w.created_at < $5)
             and ($6::text is null or w.creation_key = $6)
             and ($7::text is null
                  or exists (select 1 from step s where s.workflow_id = w.id and s.request_key = $7))
             and ($8::text is null
                  or exists (select 1 from receipt r
                             where r.workflow_id = w.id and r.external_reference = $8))
             and ($9::text is null or starts_with(w.creation_key, $9))
             and ($11::text is null or w.creation_key = $11
                  or exists (select 1 from step s where s.workflow_id = w.id and s.request_key = $11)
                  or exists (select 1 from receipt r
                             where r.workflow_id = w.id and r.external_reference = $11))
           order by w.id desc
           limit $10"#,
        query.after,
        query.state as Option<WorkflowState>,
        query.definition,
        query.adapter,
        query.created_before as _,
        query.creation_key,
        query.request_key,
        query.external_reference,
        query.creation_key_prefix,
        limit,
        query.key,
    )
    .fetch_all(pool)
    .await
}

/// The archived workflows a search by key finds, newest first: every filter given must hold
/// (an adapter filter finds none: a tombstone does not keep its steps' adapters). The keys'
/// tombstones are gathered first, each key through its own index, and fetched by id: asked only
/// beside `order by id limit`, PostgreSQL guessed that a GIN condition holds for 0.5 % of the
/// tombstones and walked them all newest first (491 ms at 350k; docs/DESIGN.md §21).
async fn archived(
    pool: &PgPool,
    query: &WorkflowQuery,
    limit: i64,
) -> sqlx::Result<Vec<WorkflowRow>> {
    if query.adapter.is_some() {
        return Ok(Vec::new());
    }
    sqlx::query_as!(
        WorkflowRow,
        r#"select a.id, a.creation_key, a.definition_name as definition, a.definition_version,
                  a.state as "state: WorkflowState", a.created_at as "created_at: DateTime<Utc>",
                  a.settled_at as "updated_at: DateTime<Utc>",
                  a.archived_at as "archived_at: DateTime<Utc>"
           from archived_workflow a
           where a.id = any(array(
                     select k.id from archived_workflow k where k.creation_key in ($5, $10)
                     union all
                     select k.id from archived_workflow k where k.request_keys @> array[$6]
                     union all
                     select k.id from archived_workflow k where k.request_keys @> array[$10]
                     union all
                     select k.id from archived_workflow k where k.external_references @> array[$7]
                     union all
                     select k.id from archived_workflow k
                     where k.external_references @> array[$10]))
             and ($1::uuid is null or a.id < $1)
             and ($2::workflow_state is null or a.state = $2)
             and ($3::text is null or a.definition_name = $3)
             and ($4::timestamptz is null or a.created_at < $4)
             and ($5::text is null or a.creation_key = $5)
             and ($6::text is null or a.request_keys @> array[$6])
             and ($7::text is null or a.external_references @> array[$7])
             and ($8::text is null or starts_with(a.creation_key, $8))
             and ($10::text is null or a.creation_key = $10 or a.request_keys @> array[$10]
                  or a.external_references @> array[$10])
           order by a.id desc
           limit $9"#,
        query.after,
        query.state as Option<WorkflowState>,
        query.definition,
        query.created_before as _,
        query.creation_key,
        query.request_key,
        query.external_reference,
        query.creation_key_prefix,
        limit,
        query.key,
    )
    .fetch_all(pool)
    .await
}
