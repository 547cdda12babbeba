//! Operators' notes (docs/DESIGN.md §20): audit entries of action `note`, on a workflow, one of
//! its steps, or an incident (its step, with the incident in the details).

use chrono::{DateTime, Utc};
use sqlx::{Executor, PgConnection, Postgres};
use uuid::Uuid;

use super::journal::{Actor, ActorKind};
use crate::domain::AuditAction;

/// What a note is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteOn {
    Workflow(Uuid),
    Step(Uuid),
    Incident(Uuid),
}

/// One note, as the pages and the API show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Note {
    pub at: DateTime<Utc>,
    pub author: String,
    pub text: String,
    pub workflow: Uuid,
    /// The step it is about (for an incident's note, the incident's step).
    pub step: Option<Uuid>,
    /// The incident it is about.
    pub incident: Option<Uuid>,
}

/// The workflow and step a note on `on` is recorded under; `None` when there is no such thing.
pub async fn place(
    conn: &mut PgConnection,
    on: NoteOn,
) -> sqlx::Result<Option<(Uuid, Option<Uuid>)>> {
    let found = match on {
        NoteOn::Workflow(id) => sqlx::query_scalar!("select id from workflow where id = $1", id)
            .fetch_optional(conn)
            .await?
            .map(|w| (w, None)),
        NoteOn::Step(id) => sqlx::query_scalar!("select workflow_id from step where id = $1", id)
            .fetch_optional(conn)
            .await?
            .map(|w| (w, Some(id))),
        NoteOn::Incident(id) => sqlx::query!(
            "select s.workflow_id, s.id from integrity_incident i join step s on s.id = i.step_id
             where i.id = $1",
            id
        )
        .fetch_optional(conn)
        .await?
        .map(|r| (r.workflow_id, Some(r.id))),
    };
    Ok(found)
}

/// Records `text` by `actor` on `on`, placed at (`workflow`, `step`).
pub async fn add(
    conn: &mut PgConnection,
    actor: Actor<'_>,
    on: NoteOn,
    (workflow, step): (Uuid, Option<Uuid>),
    text: &str,
) -> sqlx::Result<Note> {
    let (name, kind) = actor.parts();
    let incident = match on {
        NoteOn::Incident(id) => Some(id),
        _ => None,
    };
    let details = serde_json::json!({ "incident": incident });
    let at = sqlx::query_scalar!(
        r#"insert into audit (actor, actor_kind, action, workflow_id, step_id, reason, details)
           values ($1, $2, $3, $4, $5, $6, $7) returning at as "at: DateTime<Utc>""#,
        name,
        kind as ActorKind,
        AuditAction::Note.as_str(),
        workflow,
        step,
        text,
        details,
    )
    .fetch_one(conn)
    .await?;
    Ok(Note {
        at,
        author: name.to_owned(),
        text: text.to_owned(),
        workflow,
        step,
        incident,
    })
}

/// Every note on workflow `workflow`, its steps and incidents, oldest first.
pub async fn of_workflow<'e, E>(executor: E, workflow: Uuid) -> sqlx::Result<Vec<Note>>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_as!(
        Note,
        r#"select at as "at: DateTime<Utc>", actor as author, reason as "text!",
                  workflow_id as "workflow!", step_id as step,
                  (details ->> 'incident')::uuid as incident
           from audit where action = 'note' and workflow_id = $1
           order by at, id"#,
        workflow
    )
    .fetch_all(executor)
    .await
}

/// How many notes were ever written.
pub async fn count<'e, E>(executor: E) -> sqlx::Result<i64>
where
    E: Executor<'e, Database = Postgres>,
{
    sqlx::query_scalar!(r#"select count(*) as "n!" from audit where action = 'note'"#)
        .fetch_one(executor)
        .await
}
