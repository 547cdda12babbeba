//! Resolving duplicate-effect incidents: the incident row, its external references, and the
//! record of which result stands and what becomes of the others.

use crate::domain::Disposition;
use sqlx::PgConnection;
use uuid::Uuid;

/// An incident row locked for resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockedIncident {
    pub step_id: Uuid,
    pub resolved: bool,
    /// The incident kind, as text (`duplicate_effect` or `digest_conflict`).
    pub kind: String,
}

/// Locks incident `id` (`for update`, until the caller's transaction ends); `None` if there is
/// no such incident.
pub async fn lock(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<LockedIncident>> {
    let row = sqlx::query!(
        r#"select step_id, resolved_at is not null as "resolved!", kind::text as "kind!"
           from integrity_incident where id = $1 for update"#,
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| LockedIncident {
        step_id: r.step_id,
        resolved: r.resolved,
        kind: r.kind,
    }))
}

/// The external references incident `id` names, in the order they were observed.
pub async fn references(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"select external_reference from incident_reference where incident_id = $1 order by observed_at, external_reference"#,
        id
    )
    .fetch_all(conn)
    .await
}

/// Records incident `id` resolved: `canonical` stands, the others get `disposition`.
pub async fn resolve(
    conn: &mut PgConnection,
    id: Uuid,
    canonical: &str,
    disposition: Disposition,
    resolved_by: &str,
    reason: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update integrity_incident
              set canonical_reference = $2, disposition = $3,
                  resolved_by = $4, resolved_at = now(), resolution_reason = $5
            where id = $1"#,
        id,
        canonical,
        disposition as Disposition,
        resolved_by,
        reason,
    )
    .execute(conn)
    .await?;
    Ok(())
}
