//! Integrity incidents (docs/DESIGN.md §9): two references for one effect, or a key found
//! under other bytes, kept open until a person resolves them.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::{Claim, EventKind, IncidentKind};

/// The step's open incident of `kind`, opened now
/// (and announced as `incident.opened`) unless one is open already.
async fn open_incident(
    conn: &mut PgConnection,
    step: Uuid,
    kind: IncidentKind,
) -> sqlx::Result<Uuid> {
    let opened = sqlx::query!(
        r#"insert into integrity_incident (id, step_id, kind) values ($1, $2, $3)
           on conflict (step_id, kind) where resolved_at is null do nothing
           returning id"#,
        Uuid::now_v7(),
        step,
        kind as IncidentKind,
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(opened) = opened {
        let s = sqlx::query!(
            r#"select workflow_id, logical, adapter from step where id = $1"#,
            step
        )
        .fetch_one(&mut *conn)
        .await?;
        super::workflow::announce(
            conn,
            s.workflow_id,
            EventKind::IncidentOpened,
            &serde_json::json!({
                "incident": opened.id, "step": step, "kind": kind,
                "logical": s.logical, "adapter": s.adapter,
            }),
        )
        .await?;
        return Ok(opened.id);
    }
    sqlx::query_scalar!(
        r#"select id from integrity_incident
           where step_id = $1 and kind = $2 and resolved_at is null"#,
        step,
        kind as IncidentKind,
    )
    .fetch_one(conn)
    .await
}

/// Opens (or extends) the step's open duplicate-effect incident with every reference given.
pub async fn open_duplicate_incident(
    conn: &mut PgConnection,
    step: Uuid,
    references: &[(&str, Option<&str>)],
) -> sqlx::Result<Uuid> {
    let incident = open_incident(conn, step, IncidentKind::DuplicateEffect).await?;
    let listed: Vec<&str> = references.iter().map(|(r, _)| *r).collect();
    super::adapter::refute_for_step(
        conn,
        step,
        Claim::IdempotencyKey,
        &format!(
            "in production one request key was answered with {} references ({})",
            listed.len(),
            listed.join(", ")
        ),
    )
    .await?;
    for (reference, key) in references {
        sqlx::query!(
            r#"insert into incident_reference (incident_id, external_reference, request_key)
               values ($1, $2, $3) on conflict do nothing"#,
            incident,
            reference,
            *key,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(incident)
}

/// Opens a digest-conflict incident: the destination holds the request key's reference
/// under another digest.
pub async fn open_digest_conflict(
    conn: &mut PgConnection,
    step: Uuid,
    external_reference: &str,
    request_key: &str,
    evidence: &Value,
) -> sqlx::Result<Uuid> {
    let incident = open_incident(conn, step, IncidentKind::DigestConflict).await?;
    super::adapter::refute_for_step(
        conn,
        step,
        Claim::Lookup,
        &format!(
            "in production a lookup found {external_reference} under the request key `{request_key}` with another digest"
        ),
    )
    .await?;
    sqlx::query!(
        r#"insert into incident_reference (incident_id, external_reference, request_key, evidence)
           values ($1, $2, $3, $4) on conflict do nothing"#,
        incident,
        external_reference,
        request_key,
        evidence,
    )
    .execute(conn)
    .await?;
    Ok(incident)
}
