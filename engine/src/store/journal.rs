//! The outbox and the audit log: written in the same transaction as the change they announce.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::AuditAction;
use crate::domain::EventKind;

/// Appends an outbox event for `workflow` at `revision`.
pub async fn emit(
    conn: &mut PgConnection,
    workflow: Uuid,
    revision: i64,
    kind: EventKind,
    payload: &Value,
) -> sqlx::Result<Uuid> {
    let event_id = Uuid::now_v7();
    sqlx::query!(
        r#"insert into outbox (event_id, workflow_id, revision, kind, payload)
           values ($1, $2, $3, $4, $5)"#,
        event_id,
        workflow,
        revision,
        kind.as_str(),
        payload,
    )
    .execute(conn)
    .await?;
    Ok(event_id)
}

/// Appends the first events of a new `workflow`, at revisions 1, 2, … in order, in one statement.
pub async fn emit_all(
    conn: &mut PgConnection,
    workflow: Uuid,
    events: &[(EventKind, Value)],
) -> sqlx::Result<()> {
    let ids: Vec<Uuid> = events.iter().map(|_| Uuid::now_v7()).collect();
    let kinds: Vec<&str> = events.iter().map(|(kind, _)| kind.as_str()).collect();
    let payloads: Vec<Value> = events.iter().map(|(_, payload)| payload.clone()).collect();
    sqlx::query!(
        r#"insert into outbox (event_id, workflow_id, revision, kind, payload)
           select e.event_id, $2, e.revision, e.kind, e.payload
           from unnest($1::uuid[], $3::text[], $4::jsonb[]) with ordinality as e(event_id, kind, payload, revision)"#,
        &ids,
        workflow,
        &kinds as &[&str],
        &payloads,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Appends an outbox event that concerns no single workflow (an alert).
pub async fn emit_global(
    conn: &mut PgConnection,
    kind: EventKind,
    payload: &Value,
) -> sqlx::Result<Uuid> {
    let event_id = Uuid::now_v7();
    sqlx::query!(
        r#"insert into outbox (event_id, kind, payload) values ($1, $2, $3)"#,
        event_id,
        kind.as_str(),
        payload,
    )
    .execute(conn)
    .await?;
    Ok(event_id)
}

/// Who did something recorded in the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor<'a> {
    /// A signed-in person.
    Operator(&'a str),
    /// An API client, by token name.
    Api(&'a str),
    /// The engine itself (a worker or the sweeper).
    Engine(&'a str),
}

/// Which kind of actor an audit entry names (`audit.actor_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, sqlx::Type)]
#[sqlx(type_name = "text", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    Operator,
    Api,
    Engine,
}

impl ActorKind {
    /// The name the audit row records.
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::Operator => "operator",
            ActorKind::Api => "api",
            ActorKind::Engine => "engine",
        }
    }
}

impl Actor<'_> {
    /// How a stored file names who applied it: `token:NAME` for an API client, the name
    /// otherwise.
    pub fn label(&self) -> String {
        match self {
            Actor::Api(name) => format!("token:{name}"),
            Actor::Operator(name) | Actor::Engine(name) => (*name).to_owned(),
        }
    }

    pub(super) fn parts(&self) -> (&str, ActorKind) {
        match self {
            Actor::Operator(name) => (name, ActorKind::Operator),
            Actor::Api(name) => (name, ActorKind::Api),
            Actor::Engine(name) => (name, ActorKind::Engine),
        }
    }
}

/// One audit entry.
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    pub actor: Actor<'a>,
    pub action: AuditAction,
    pub workflow: Option<Uuid>,
    pub step: Option<Uuid>,
    pub reason: Option<&'a str>,
    pub details: Value,
}

/// Appends an entry to the audit log.
pub async fn audit(conn: &mut PgConnection, entry: &AuditEntry<'_>) -> sqlx::Result<()> {
    let (actor, actor_kind) = entry.actor.parts();
    sqlx::query!(
        r#"insert into audit (actor, actor_kind, action, workflow_id, step_id, reason, details)
           values ($1, $2, $3, $4, $5, $6, $7)"#,
        actor,
        actor_kind as ActorKind,
        entry.action.as_str(),
        entry.workflow,
        entry.step,
        entry.reason,
        entry.details,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Appends an entry about no workflow or step: an operator, a token, an adapter's hold.
pub async fn audit_unattached(
    conn: &mut PgConnection,
    actor: Actor<'_>,
    action: AuditAction,
    reason: Option<&str>,
    details: Value,
) -> sqlx::Result<()> {
    let entry = AuditEntry {
        actor,
        action,
        workflow: None,
        step: None,
        reason,
        details,
    };
    audit(conn, &entry).await
}

/// One audit entry as the audit page lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AuditRow {
    pub id: i64,
    pub at: chrono::DateTime<chrono::Utc>,
    pub actor: String,
    pub actor_kind: ActorKind,
    pub action: String,
    pub workflow: Option<Uuid>,
    pub step: Option<Uuid>,
    pub reason: Option<String>,
    pub details: Value,
}

/// Up to `limit` audit entries older than `before` (an entry id), newest first, filtered by
/// actor and action when given. Served by `audit_at_idx` and the actor and action indexes.
pub async fn page(
    conn: &mut PgConnection,
    actor: Option<&str>,
    action: Option<&str>,
    before: Option<i64>,
    limit: i64,
) -> sqlx::Result<Vec<AuditRow>> {
    sqlx::query_as!(
        AuditRow,
        r#"select id, at as "at: chrono::DateTime<chrono::Utc>", actor,
                  actor_kind as "actor_kind: ActorKind", action,
                  workflow_id as workflow, step_id as step, reason, details
           from audit
           where ($1::text is null or actor = $1)
             and ($2::text is null or action = $2)
             and ($3::bigint is null or id < $3)
           order by id desc
           limit $4"#,
        actor,
        action,
        before,
        limit,
    )
    .fetch_all(conn)
    .await
}
