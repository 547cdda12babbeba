//! One integrity incident as its page shows it: the references it concerns, how it was
//! resolved, and the withdrawals asked for.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use crate::domain::{Disposition, IncidentKind, SideEffectContract, StepState};

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
    pub kind: IncidentKind,
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
        r#"select i.id, i.kind as "kind: IncidentKind", i.opened_at as "opened_at: DateTime<Utc>", i.step_id,
                  s.workflow_id, w.creation_key, s.logical, s.adapter, s.request_key,
                  a.contract as "contract?", rc.external_reference as "receipt_reference?",
                  i.canonical_reference, i.disposition as "disposition: Disposition", i.resolved_by,
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
    let references = references(pool, id, i.receipt_reference.as_deref()).await?;
    let withdrawals = withdrawals(pool, id).await?;
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
        resolution: resolution(
            i.canonical_reference,
            i.disposition,
            i.resolved_by,
            i.resolved_at,
            i.resolution_reason,
        ),
        withdrawals,
        withdrawable: contract.is_some_and(|c| {
            matches!(
                c.compensation,
                crate::domain::Compensation::SupportedWithLimits(_)
            )
        }),
    }))
}

/// The references incident `id` concerns, in the order they were observed; `receipt_reference`
/// is the one the step's receipt names, if any.
async fn references(
    pool: &PgPool,
    id: Uuid,
    receipt_reference: Option<&str>,
) -> sqlx::Result<Vec<IncidentReference>> {
    let rows = sqlx::query!(
        r#"select external_reference, request_key, evidence, observed_at as "observed_at: DateTime<Utc>"
           from incident_reference where incident_id = $1 order by observed_at, external_reference"#,
        id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| IncidentReference {
            on_receipt: receipt_reference == Some(r.external_reference.as_str()),
            external_reference: r.external_reference,
            request_key: r.request_key,
            evidence: r.evidence,
            observed_at: r.observed_at,
        })
        .collect())
}

/// The compensation steps asking to withdraw a duplicate of incident `id`: id, reference,
/// state, oldest first.
async fn withdrawals(pool: &PgPool, id: Uuid) -> sqlx::Result<Vec<(Uuid, String, StepState)>> {
    let rows = sqlx::query!(
        r#"select c.compensation_step_id, c.external_reference, s.state as "state: StepState"
           from compensation_link c join step s on s.id = c.compensation_step_id
           where c.incident_id = $1 order by s.created_at"#,
        id
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.compensation_step_id, r.external_reference, r.state))
        .collect())
}

/// The resolution, once every part of it is recorded.
fn resolution(
    canonical_reference: Option<String>,
    disposition: Option<Disposition>,
    resolved_by: Option<String>,
    resolved_at: Option<DateTime<Utc>>,
    reason: Option<String>,
) -> Option<Resolution> {
    match (
        canonical_reference,
        disposition,
        resolved_by,
        resolved_at,
        reason,
    ) {
        (
            Some(canonical_reference),
            Some(disposition),
            Some(resolved_by),
            Some(resolved_at),
            Some(reason),
        ) => Some(Resolution {
            canonical_reference,
            disposition: disposition.recorded_as().to_owned(),
            resolved_by,
            resolved_at,
            reason,
        }),
        _ => None,
    }
}
