//! A step as an operator action reads it: the row, locked for the action or read for a page,
//! with the facts the decision table decides from; and the step writes the actions make.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::StepKind;
use crate::domain::trust::{for_request_sent_under, for_withdrawal};
use crate::domain::{LookupAnswer, SideEffectContract, StepState};

/// A step row locked for an action, with the facts the decision table reads.
#[derive(Debug, Clone)]
pub struct StepFacts {
    pub workflow_id: Uuid,
    pub state: StepState,
    pub kind: StepKind,
    pub logical: String,
    pub definition_version: i32,
    pub adapter: Option<String>,
    /// The trusted contract as it speaks for this step's request: none of the claims about it
    /// when it was sent under another version of the adapter (withdrawing it stays), and none
    /// of the delivery's claims when it is a withdrawal.
    pub contract: Option<SideEffectContract>,
    pub request_key: Option<String>,
    pub receipt_reference: Option<String>,
    pub version: i64,
    pub leased_until: Option<DateTime<Utc>>,
    pub last_lookup: Option<LookupAnswer>,
    pub request_prepared: bool,
    /// The request identity is persisted (not only regenerable after a restore).
    pub request_bound: bool,
    pub contract_version: Option<i32>,
    /// The adapter version the step's request was sent under, once it was.
    pub sent_version: Option<i32>,
    pub open_incident: bool,
    /// How long ago the request was first sent, in milliseconds.
    pub key_first_sent_ms_ago: Option<u64>,
}

impl StepFacts {
    /// The decision table's facts; `None` for a pure step, which has no contract.
    pub fn decision_facts(&self) -> Option<crate::domain::StepFacts<'_>> {
        Some(crate::domain::StepFacts {
            state: self.state,
            contract: self.contract.as_ref()?,
            last_lookup: self.last_lookup.as_ref(),
            request_prepared: self.request_prepared,
            open_incident: self.open_incident,
            key_first_sent_ms_ago: self.key_first_sent_ms_ago,
        })
    }
}

/// Locks a step for an operator action (`for update`, until the caller's transaction ends),
/// then reads it as [`read_facts`] does.
pub async fn lock_for_action(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<StepFacts>> {
    sqlx::query!("select id from step where id = $1 for update", id)
        .fetch_optional(&mut *conn)
        .await?;
    read_facts(conn, id).await
}

/// Reads, without a lock, a step and the facts its permitted actions depend on. The last
/// lookup counts only if it was made after the request was last sent.
pub async fn read_facts(conn: &mut PgConnection, id: Uuid) -> sqlx::Result<Option<StepFacts>> {
    let Some(r) = sqlx::query!(
        r#"select s.workflow_id, s.state as "state: StepState", s.kind as "kind: StepKind",
                  s.logical, s.definition_version, s.adapter, a.contract as "contract?",
                  s.request_key, s.version,
                  (select l.expires_at from lease l where l.id = s.lease_id and l.expires_at > now())
                      as "leased_until: chrono::DateTime<chrono::Utc>",
                  rc.external_reference as "receipt_reference?",
                  -- Bound, or restored: a request the live system may have sent after the backup,
                  -- regenerated identically when evidence of it is attached.
                  (q.request_key is not null or s.restored_at is not null) as "request_prepared!",
                  q.request_key is not null as "request_bound!", a.contract_version as "contract_version?",
                  q.contract_version as "sent_version?",
                  exists(select 1 from compensation_link c where c.compensation_step_id = s.id)
                      as "withdrawal!",
                  (extract(epoch from now() - q.first_sent_at) * 1000)::bigint as key_age_ms,
                  (select o.body from observation o
                    where o.step_id = s.id and o.kind = 'lookup'
                      and o.observed_at >= coalesce(q.last_sent_at, '-infinity')
                    order by o.id desc limit 1) as last_lookup,
                  exists(select 1 from integrity_incident i
                         where i.step_id = s.id and i.resolved_at is null) as "open_incident!"
           from step s
           left join adapter a on a.name = s.adapter
           left join external_request q on q.request_key = s.request_key
           left join receipt rc on rc.id = s.receipt_id
           where s.id = $1"#,
        id
    )
    .fetch_optional(conn)
    .await?
    else {
        return Ok(None);
    };
    Ok(Some(StepFacts {
        workflow_id: r.workflow_id,
        state: r.state,
        kind: r.kind,
        logical: r.logical,
        definition_version: r.definition_version,
        adapter: r.adapter,
        contract: r
            .contract
            .and_then(|c| serde_json::from_value(c).ok())
            .map(|c| for_request_sent_under(c, r.sent_version, r.contract_version))
            .map(|c| if r.withdrawal { for_withdrawal(&c) } else { c }),
        request_key: r.request_key,
        receipt_reference: r.receipt_reference,
        version: r.version,
        leased_until: r.leased_until,
        last_lookup: r
            .last_lookup
            .and_then(|b| LookupAnswer::from_observation_body(&b)),
        request_prepared: r.request_prepared,
        request_bound: r.request_bound,
        contract_version: r.contract_version,
        sent_version: r.sent_version,
        open_incident: r.open_incident,
        key_first_sent_ms_ago: r.key_age_ms.map(|ms| u64::try_from(ms).unwrap_or(0)),
    }))
}

/// Sends the step back to the worker queue: its next attempt reuses its request key.
pub async fn to_ready(conn: &mut PgConnection, step: Uuid) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update step set state = 'ready', run_after = now(), unknown_since = null, updated_at = now()
           where id = $1"#,
        step
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Cancels `step` and the steps of `workflow` that have not started (blocked or ready, held by
/// no worker); returns the ids of every step it cancelled, `step` among them.
pub async fn cancel_with_unstarted(
    conn: &mut PgConnection,
    step: Uuid,
    workflow: Uuid,
) -> sqlx::Result<Vec<Uuid>> {
    sqlx::query_scalar!(
        r#"update step set state = 'cancelled', unknown_since = null, updated_at = now()
           where id = $1
              or (workflow_id = $2 and state in ('blocked', 'ready') and lease_holder is null)
           returning id"#,
        step,
        workflow,
    )
    .fetch_all(conn)
    .await
}
