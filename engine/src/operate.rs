//! What people do to steps the engine could not settle by itself.
//!
//! Every action locks the step row, then decides again, inside that transaction, whether the
//! operator's role and the adapter's contract permit it ([`crate::domain::refusal`], the same
//! function that drew the page), whether the page the operator acted from is still current,
//! and whether a worker holds the step right now. Only then does it change anything, and the
//! audit entry commits with the change. A stale page, a second operator or a forged request
//! gets a refusal in words and changes nothing.

use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::definition::StepKind;
use crate::domain::{
    Compensation, LookupAnswer, OperatorAction, Role, SideEffectContract, StepFacts, StepState,
    refusal,
};
use crate::operators::Operator;
use crate::store::journal::{self, Actor, AuditEntry};
use crate::store::step::{self, NewReceipt, ReceiptOutcome};
use crate::store::workflow;
use crate::worker::{Adapters, Worker, WorkerConfig};

/// What the operator asked for, with what that action needs besides a reason.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    CheckDestination,
    RetrySameKey,
    AttachEvidence {
        external_reference: String,
        evidence: String,
    },
    Waive {
        residual_uncertainty: String,
    },
    AuthorizeAnotherAttempt {
        acknowledged_duplicate_risk: bool,
    },
    Cancel,
    /// `corrected_input` replaces the workflow's input for the new step (`None`: the same input).
    Replace {
        corrected_input: Option<Value>,
    },
}

impl Action {
    /// The decision table's name for this action.
    pub fn kind(&self) -> OperatorAction {
        match self {
            Action::CheckDestination => OperatorAction::CheckDestination,
            Action::RetrySameKey => OperatorAction::RetrySameKey,
            Action::AttachEvidence { .. } => OperatorAction::AttachEvidence,
            Action::Waive { .. } => OperatorAction::Waive,
            Action::AuthorizeAnotherAttempt { .. } => OperatorAction::AuthorizeAnotherAttempt,
            Action::Cancel => OperatorAction::Cancel,
            Action::Replace { .. } => OperatorAction::Replace,
        }
    }
}

/// One request to act on a step.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub operator: &'a Operator,
    pub step: Uuid,
    /// The step's version on the page the operator acted from; `None` skips the staleness
    /// check (the CLI and bulk recovery, which re-read the row they act on).
    pub seen_version: Option<i64>,
    pub reason: &'a str,
    pub action: Action,
}

/// What an action did, in words, and where the operator should look next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    pub message: String,
    /// The step to show next (a replacement opens on the new step).
    pub step: Uuid,
}

/// Why nothing was done.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error("no such step")]
    NotFound,
    /// The operator's role does not allow the action.
    #[error("{0}")]
    Forbidden(String),
    /// The contract does not permit it in the step's current state.
    #[error("{0}")]
    NotPermitted(String),
    /// The step changed since the page was drawn, or a worker holds it right now.
    #[error("{0}")]
    Conflict(String),
    /// A required field is missing or malformed.
    #[error("{0}")]
    Invalid(String),
    #[error("the destination could not be asked: {0}")]
    Worker(String),
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
}

impl From<step::GuardedError> for ActionError {
    fn from(error: step::GuardedError) -> Self {
        match error {
            step::GuardedError::LeaseLost(_) => ActionError::Conflict(
                "A worker took this step over while you acted; reload to see what it did.".into(),
            ),
            step::GuardedError::Sqlx(e) => e.into(),
        }
    }
}

/// A step row locked for an action, with the facts the decision table reads.
#[derive(Debug, Clone)]
pub struct Locked {
    pub workflow_id: Uuid,
    pub state: StepState,
    pub kind: StepKind,
    pub logical: String,
    pub definition_version: i32,
    pub adapter: Option<String>,
    pub contract: Option<SideEffectContract>,
    pub request_key: Option<String>,
    pub receipt_reference: Option<String>,
    pub version: i64,
    pub leased_until: Option<chrono::DateTime<chrono::Utc>>,
    pub last_lookup: Option<LookupAnswer>,
    pub request_prepared: bool,
    /// The request identity is persisted (not only regenerable after a restore).
    pub request_bound: bool,
    pub contract_version: Option<i32>,
    pub open_incident: bool,
}

impl Locked {
    /// The decision table's facts; `None` for a pure step, which has no contract.
    pub fn facts(&self) -> Option<StepFacts<'_>> {
        Some(StepFacts {
            state: self.state,
            contract: self.contract.as_ref()?,
            last_lookup: self.last_lookup.as_ref(),
            request_prepared: self.request_prepared,
            open_incident: self.open_incident,
        })
    }
}

/// The version a page carries: the step's last change, in microseconds.
pub fn version_of(updated_at: chrono::DateTime<chrono::Utc>) -> i64 {
    updated_at.timestamp_micros()
}

/// Reads (and with `lock`, locks) a step and the facts its permitted actions depend on. The
/// last lookup counts only if it was made after the request was last sent.
pub async fn facts(conn: &mut PgConnection, id: Uuid, lock: bool) -> sqlx::Result<Option<Locked>> {
    if lock {
        sqlx::query!("select id from step where id = $1 for update", id)
            .fetch_optional(&mut *conn)
            .await?;
    }
    let Some(r) = sqlx::query!(
        r#"select s.workflow_id, s.state as "state: StepState", s.kind as "kind: StepKind",
                  s.logical, s.definition_version, s.adapter, a.contract as "contract?",
                  s.request_key, s.updated_at as "updated_at: chrono::DateTime<chrono::Utc>",
                  case when s.lease_expires_at > now() then s.lease_expires_at end
                      as "leased_until: chrono::DateTime<chrono::Utc>",
                  rc.external_reference as "receipt_reference?",
                  -- Bound, or restored: a request the live system may have sent after the backup,
                  -- regenerated identically when evidence of it is attached.
                  (q.request_key is not null or s.restored_at is not null) as "request_prepared!",
                  q.request_key is not null as "request_bound!", a.contract_version as "contract_version?",
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
    Ok(Some(Locked {
        workflow_id: r.workflow_id,
        state: r.state,
        kind: r.kind,
        logical: r.logical,
        definition_version: r.definition_version,
        adapter: r.adapter,
        contract: r.contract.and_then(|c| serde_json::from_value(c).ok()),
        request_key: r.request_key,
        receipt_reference: r.receipt_reference,
        version: version_of(r.updated_at),
        leased_until: r.leased_until,
        last_lookup: r.last_lookup.and_then(|b| crate::review::lookup_answer(&b)),
        request_prepared: r.request_prepared,
        request_bound: r.request_bound,
        contract_version: r.contract_version,
        open_incident: r.open_incident,
    }))
}

/// Checks, in order: the role, the page's freshness, a worker's lease, the contract.
fn admit(
    locked: &Locked,
    role: Role,
    action: OperatorAction,
    seen: Option<i64>,
) -> Result<(), ActionError> {
    if !role.may(action) {
        return Err(ActionError::Forbidden(format!(
            "{} needs the {} role; you are signed in as {}.",
            action.label(),
            role_name(action.required_role()),
            role_name(role)
        )));
    }
    if seen.is_some_and(|v| v != locked.version) {
        return Err(ActionError::Conflict(format!(
            "This step changed since your page was drawn (it is now {}). Nothing was done; review the evidence again.",
            locked.state.label().to_lowercase()
        )));
    }
    if let Some(until) = locked.leased_until {
        return Err(ActionError::Conflict(format!(
            "A worker is handling this step right now (its lease runs until {}). Nothing was done; reload in a moment.",
            until.format("%H:%M:%S UTC")
        )));
    }
    let facts = locked.facts().ok_or_else(|| {
        ActionError::NotPermitted(format!(
            "{} does not apply to a step that calls no destination.",
            action.label()
        ))
    })?;
    match refusal(&facts, role, action) {
        None => Ok(()),
        Some(why) => Err(ActionError::NotPermitted(why)),
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Viewer => "viewer",
        Role::Operator => "operator",
        Role::Approver => "approver",
    }
}

fn required(field: &str, value: &str, max: usize) -> Result<String, ActionError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(ActionError::Invalid(format!("{field} is required.")));
    }
    if value.chars().count() > max {
        return Err(ActionError::Invalid(format!(
            "{field} is longer than {max} characters."
        )));
    }
    Ok(value.to_owned())
}

/// Performs `request` if the operator's role and the contract permit it now.
pub async fn perform(pool: &PgPool, request: Request<'_>) -> Result<Done, ActionError> {
    let reason = required("A reason", request.reason, 2000)?;
    let kind = request.action.kind();
    let mut tx = pool.begin().await?;
    let locked = facts(&mut tx, request.step, true)
        .await?
        .ok_or(ActionError::NotFound)?;
    admit(&locked, request.operator.role, kind, request.seen_version)?;
    let actor = Actor::Operator(&request.operator.username);
    let (message, details, next_step) = match &request.action {
        Action::CheckDestination => {
            // The lookup is a network call: the step is leased to this operator for it, so
            // no worker or second operator acts meanwhile, and the lookup runs after commit.
            let holder = format!("console:{}", request.operator.username);
            audit(
                &mut tx,
                actor,
                kind,
                &locked,
                request.step,
                &reason,
                json!({}),
            )
            .await?;
            tx.commit().await?;
            return check_destination(pool, &locked, request.step, &holder).await;
        }
        Action::RetrySameKey => {
            to_ready(&mut tx, request.step).await?;
            (
                format!(
                    "A new attempt will be sent under the same request key {}.",
                    locked.request_key.as_deref().unwrap_or("—")
                ),
                json!({ "request_key": locked.request_key }),
                request.step,
            )
        }
        Action::AttachEvidence {
            external_reference,
            evidence,
        } => {
            let external_reference = required("The external reference", external_reference, 200)?;
            let evidence = required("Evidence", evidence, 4000)?;
            let key = locked.request_key.as_deref().unwrap_or_default();
            if !locked.request_bound {
                bind_restored_request(&mut tx, request.step, &locked).await?;
            }
            let receipt = NewReceipt {
                step: request.step,
                request_key: key,
                external_reference: &external_reference,
                completion_state: "accepted",
                method: "manual_evidence",
                result_summary: &json!({ "attached_by": request.operator.username }),
                author: Some(&request.operator.username),
                evidence: Some(&evidence),
                reason: Some(&reason),
            };
            match step::commit_receipt(&mut tx, None, &receipt).await? {
                ReceiptOutcome::Committed { .. } => {
                    step::release_dependants(&mut tx, locked.workflow_id).await?;
                }
                ReceiptOutcome::AlreadyRecorded | ReceiptOutcome::Duplicate { .. } => {
                    return Err(ActionError::Conflict(
                        "This step has a receipt already; nothing was attached.".into(),
                    ));
                }
            }
            workflow::announce(
                &mut tx,
                locked.workflow_id,
                "step.verified",
                &json!({
                    "step": request.step, "external_reference": external_reference,
                    "method": "manual_evidence", "logical": locked.logical, "adapter": locked.adapter,
                }),
            )
            .await?;
            (
                format!(
                    "Receipt recorded from manual evidence: external reference {external_reference}."
                ),
                json!({ "external_reference": external_reference, "evidence": evidence }),
                request.step,
            )
        }
        Action::Waive {
            residual_uncertainty,
        } => {
            let residual = required("The residual uncertainty", residual_uncertainty, 2000)?;
            waive(
                &mut tx,
                &locked,
                request.step,
                &request.operator.username,
                &reason,
                &residual,
            )
            .await?;
            (
                format!("Step waived. Residual uncertainty recorded: {residual}"),
                json!({ "residual_uncertainty": residual }),
                request.step,
            )
        }
        Action::AuthorizeAnotherAttempt {
            acknowledged_duplicate_risk,
        } => {
            if !acknowledged_duplicate_risk {
                return Err(ActionError::Invalid(
                    "Another attempt under an adapter that cannot prove the first one's outcome may deliver twice; acknowledge that risk to authorize it.".into(),
                ));
            }
            let authorization = Uuid::now_v7();
            sqlx::query!(
                r#"insert into operator_authorization (id, step_id, author, reason, acknowledged_duplicate_risk)
                   values ($1, $2, $3, $4, true)"#,
                authorization,
                request.step,
                request.operator.username,
                reason,
            )
            .execute(&mut *tx)
            .await?;
            to_ready(&mut tx, request.step).await?;
            (
                "Another attempt is authorized; it will carry your authorization, and a second delivery is possible.".into(),
                json!({ "authorization": authorization, "acknowledged_duplicate_risk": true }),
                request.step,
            )
        }
        Action::Cancel => cancel(&mut tx, &locked, request.step).await?,
        Action::Replace { corrected_input } => {
            let (replacement, details) = crate::replace::create_replacement(
                &mut tx,
                &locked,
                request.step,
                corrected_input.as_ref(),
            )
            .await?;
            (
                format!(
                    "Replacement step created under the new request key {}.",
                    details["new_key"].as_str().unwrap_or_default()
                ),
                details,
                replacement,
            )
        }
    };
    audit(
        &mut tx,
        actor,
        kind,
        &locked,
        request.step,
        &reason,
        details,
    )
    .await?;
    workflow::refresh_state(&mut tx, locked.workflow_id).await?;
    tx.commit().await?;
    Ok(Done {
        message,
        step: next_step,
    })
}

async fn audit(
    conn: &mut PgConnection,
    actor: Actor<'_>,
    action: OperatorAction,
    locked: &Locked,
    step: Uuid,
    reason: &str,
    details: Value,
) -> sqlx::Result<()> {
    journal::audit(
        conn,
        &AuditEntry {
            actor,
            action: action.name(),
            workflow: Some(locked.workflow_id),
            step: Some(step),
            reason: Some(reason),
            details,
        },
    )
    .await
}

/// Sends the step back to the worker queue: its next attempt reuses its request key.
async fn to_ready(conn: &mut PgConnection, step: Uuid) -> sqlx::Result<()> {
    sqlx::query!(
        r#"update step set state = 'ready', run_after = now(), unknown_since = null, updated_at = now()
           where id = $1"#,
        step
    )
    .execute(conn)
    .await?;
    Ok(())
}

async fn waive(
    conn: &mut PgConnection,
    locked: &Locked,
    step: Uuid,
    author: &str,
    reason: &str,
    residual: &str,
) -> sqlx::Result<()> {
    let waiver = Uuid::now_v7();
    sqlx::query!(
        r#"insert into waiver (id, step_id, author, reason, residual_uncertainty) values ($1, $2, $3, $4, $5)"#,
        waiver,
        step,
        author,
        reason,
        residual,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        r#"update step set state = 'waived', waiver_id = $2, unknown_since = null, updated_at = now()
           where id = $1"#,
        step,
        waiver,
    )
    .execute(&mut *conn)
    .await?;
    step::release_dependants(conn, locked.workflow_id).await?;
    workflow::announce(
        conn,
        locked.workflow_id,
        "step.waived",
        &json!({
            "step": step, "residual_uncertainty": residual,
            "logical": locked.logical, "adapter": locked.adapter,
        }),
    )
    .await?;
    Ok(())
}

/// Cancel, by state: before the call it prevents the effect; during an unknown outcome it
/// stops future work (the effect may still have happened); after a receipt it requests
/// withdrawal through a compensation step.
async fn cancel(
    conn: &mut PgConnection,
    locked: &Locked,
    step: Uuid,
) -> Result<(String, Value, Uuid), ActionError> {
    if locked.state == StepState::Succeeded {
        let reference = locked.receipt_reference.clone().unwrap_or_default();
        let compensation = request_withdrawal(conn, step, &reference, None).await?;
        return Ok((
            format!(
                "Withdrawal of {reference} requested; it runs as its own step with its own key and receipt."
            ),
            json!({ "withdrawal_step": compensation, "external_reference": reference }),
            compensation,
        ));
    }
    // This step and the work after it that has not started.
    let stopped = sqlx::query_scalar!(
        r#"update step set state = 'cancelled', unknown_since = null, updated_at = now()
           where id = $1
              or (workflow_id = $2 and state in ('blocked', 'ready') and lease_holder is null)
           returning id"#,
        step,
        locked.workflow_id,
    )
    .fetch_all(&mut *conn)
    .await?;
    workflow::announce(
        conn,
        locked.workflow_id,
        "step.cancelled",
        &json!({ "step": step, "also_stopped": stopped.len().saturating_sub(1) }),
    )
    .await?;
    let message = if matches!(locked.state, StepState::Blocked | StepState::Ready) {
        "Cancelled before any call: the effect will not happen.".to_owned()
    } else {
        "Cancelled: no further attempt or recovery will run. The first attempt's effect may still have happened.".to_owned()
    };
    Ok((message, json!({ "stopped": stopped }), step))
}

/// Creates a compensation step that asks the destination to withdraw `reference` under its
/// own request key; it runs, and may end unknown, like any external step.
pub async fn request_withdrawal(
    conn: &mut PgConnection,
    original: Uuid,
    reference: &str,
    incident: Option<Uuid>,
) -> sqlx::Result<Uuid> {
    let id = Uuid::now_v7();
    sqlx::query!(
        r#"insert into step (id, workflow_id, logical, definition_version, generation, kind, adapter,
                             state, request_key)
           select $1, o.workflow_id, o.logical || '.withdrawal', o.definition_version, n.generation,
                  'compensation', o.adapter, 'ready',
                  coalesce(o.request_key, o.id::text) || '/withdraw-' || n.generation
           from step o,
                lateral (select count(*)::int as generation from step c
                         where c.workflow_id = o.workflow_id and c.logical = o.logical || '.withdrawal') n
           where o.id = $2"#,
        id,
        original,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        r#"insert into compensation_link (compensation_step_id, original_step_id, external_reference, incident_id)
           values ($1, $2, $3, $4)"#,
        id,
        original,
        reference,
        incident,
    )
    .execute(conn)
    .await?;
    Ok(id)
}

/// When, in `wait_ms`, the destination's status index will have caught up.
fn check_again_at(wait_ms: u64) -> String {
    let at = chrono::Utc::now()
        + chrono::Duration::milliseconds(i64::try_from(wait_ms).unwrap_or(i64::MAX / 2));
    at.format("%H:%M:%S UTC").to_string()
}

/// A step restored from a backup taken before its call has no persisted request identity;
/// evidence of the delivery the live system made names the regenerated request, bound now.
/// The lease lends the step in the shape regeneration reads; the receipt committed in the same
/// transaction ends it.
async fn bind_restored_request(
    tx: &mut PgConnection,
    step_id: Uuid,
    locked: &Locked,
) -> Result<(), ActionError> {
    let step = step::lease_for_operator(tx, step_id, "evidence", 30.0)
        .await?
        .ok_or(ActionError::NotFound)?;
    let key = crate::domain::RequestKey::from(locked.request_key.clone().unwrap_or_default());
    crate::worker::bind_regenerated(tx, &step, &key, locked.contract_version.unwrap_or(0))
        .await
        .map_err(|e| ActionError::Worker(e.to_string()))
}

/// *Check destination*: leases the step to the operator, asks the destination by client
/// reference, and acts on the answer as the decision table says.
async fn check_destination(
    pool: &PgPool,
    locked: &Locked,
    step_id: Uuid,
    holder: &str,
) -> Result<Done, ActionError> {
    let adapters = Adapters::load(pool).await?;
    let contract = locked
        .contract
        .clone()
        .unwrap_or_else(|| unreachable!("admitted"));
    let mut config = WorkerConfig::named(holder);
    config.lease = std::time::Duration::from_millis(contract.deadline_ms.saturating_mul(2) + 5_000);
    let worker = Worker::new(pool.clone(), config, adapters);
    let mut tx = pool.begin().await?;
    let leased = step::lease_for_operator(
        &mut tx,
        step_id,
        worker.name(),
        worker.lease().as_secs_f64(),
    )
    .await?
    .ok_or_else(|| {
        ActionError::Conflict(
            "Someone else is checking this step right now; reload in a moment.".into(),
        )
    })?;
    tx.commit().await?;
    let (answer, _) = worker
        .check_destination(&leased)
        .await
        .map_err(|e| ActionError::Worker(e.to_string()))?;
    let window = contract.visibility_window_ms;
    let settles_in_ms = answer
        .as_ref()
        .map_or(0, |a| a.index_settles_in_ms(&contract));
    let message = match answer {
        None => "The destination holds more than one delivery for this request: a duplicate-effect incident is open.".to_owned(),
        Some(LookupAnswer::Found { external_reference, digest_matches: true, .. }) if settles_in_ms > 0 => format!(
            "Found {external_reference}, but the destination's status index may lag up to {window} ms behind it: another delivery under this key may not show yet. Check again after {} to settle the step.",
            check_again_at(settles_in_ms)
        ),
        Some(LookupAnswer::Found { external_reference, digest_matches: true, .. }) => {
            format!("Delivery verified from external reference {external_reference}; the step succeeded with a status-query receipt.")
        }
        Some(LookupAnswer::Found { external_reference, digest_matches: false, .. }) => format!(
            "The destination holds {external_reference} under this request key with other content: an integrity incident is open and the step awaits review."
        ),
        Some(answer @ LookupAnswer::NotFound { .. }) => {
            if answer.is_authoritative_absence(&contract) {
                if contract.create_after_authoritative_absence {
                    "Not found, and the visibility window has passed: absence is authoritative. Retry with the same reference is now permitted.".to_owned()
                } else {
                    "Not found, and the visibility window has passed: absence is authoritative, but this contract does not allow sending again.".to_owned()
                }
            } else {
                format!(
                    "Not found yet, but the destination's status index may lag up to {window} ms behind it: absence is not proof. Check again after {}.",
                    check_again_at(settles_in_ms)
                )
            }
        }
        Some(LookupAnswer::Processing) => "The destination is still processing the request; check again shortly.".to_owned(),
        Some(LookupAnswer::Unavailable) => "The destination's status lookup did not answer; nothing changed. Check again later.".to_owned(),
    };
    Ok(Done {
        message,
        step: step_id,
    })
}

/// How a duplicate-effect incident is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Ask the destination to withdraw every other reference (compensation steps).
    Withdraw,
    /// Keep the duplicate, recorded as accepted and unresolved.
    AcceptUnresolved,
}

/// Resolves an open duplicate-effect incident: `canonical` is the result that stands.
pub async fn resolve_incident(
    pool: &PgPool,
    operator: &Operator,
    incident: Uuid,
    canonical: &str,
    disposition: Disposition,
    reason: &str,
) -> Result<Done, ActionError> {
    let reason = required("A reason", reason, 2000)?;
    let mut tx = pool.begin().await?;
    let Some(row) = sqlx::query!(
        r#"select step_id, resolved_at is not null as "resolved!", kind::text as "kind!"
           from integrity_incident where id = $1 for update"#,
        incident
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Err(ActionError::NotFound);
    };
    let locked = facts(&mut tx, row.step_id, true)
        .await?
        .ok_or(ActionError::NotFound)?;
    if row.resolved {
        return Err(ActionError::Conflict(
            "This incident was resolved already; nothing was done.".into(),
        ));
    }
    if !operator.role.may(OperatorAction::ResolveIncident) {
        return Err(ActionError::Forbidden(format!(
            "Resolving an incident needs the approver role; you are signed in as {}.",
            role_name(operator.role)
        )));
    }
    let references: Vec<String> = sqlx::query_scalar!(
        r#"select external_reference from incident_reference where incident_id = $1 order by observed_at, external_reference"#,
        incident
    )
    .fetch_all(&mut *tx)
    .await?;
    if !references.iter().any(|r| r == canonical) {
        return Err(ActionError::Invalid(
            "The canonical result must be one of the incident's external references.".into(),
        ));
    }
    let mut withdrawals = Vec::new();
    if disposition == Disposition::Withdraw {
        let withdrawable = locked
            .contract
            .as_ref()
            .is_some_and(|c| matches!(c.compensation, Compensation::SupportedWithLimits(_)));
        if !withdrawable {
            return Err(ActionError::NotPermitted(
                "This adapter cannot withdraw a delivery; accept the duplicate as unresolved instead.".into(),
            ));
        }
        for duplicate in references.iter().filter(|r| *r != canonical) {
            withdrawals
                .push(request_withdrawal(&mut tx, row.step_id, duplicate, Some(incident)).await?);
        }
    }
    let disposition_name = match disposition {
        Disposition::Withdraw => "withdrawal_requested",
        Disposition::AcceptUnresolved => "accepted_unresolved",
    };
    sqlx::query!(
        r#"update integrity_incident
              set canonical_reference = $2, disposition = $3::text::duplicate_disposition,
                  resolved_by = $4, resolved_at = now(), resolution_reason = $5
            where id = $1"#,
        incident,
        canonical,
        disposition_name,
        operator.username,
        reason,
    )
    .execute(&mut *tx)
    .await?;
    step::release_dependants(&mut tx, locked.workflow_id).await?;
    workflow::announce(
        &mut tx,
        locked.workflow_id,
        "incident.resolved",
        &json!({ "incident": incident, "canonical": canonical, "disposition": disposition_name }),
    )
    .await?;
    audit(
        &mut tx,
        Actor::Operator(&operator.username),
        OperatorAction::ResolveIncident,
        &locked,
        row.step_id,
        &reason,
        json!({ "incident": incident, "kind": row.kind, "canonical": canonical,
                "disposition": disposition_name, "withdrawal_steps": withdrawals }),
    )
    .await?;
    workflow::refresh_state(&mut tx, locked.workflow_id).await?;
    tx.commit().await?;
    let message = match disposition {
        Disposition::Withdraw => format!(
            "Resolved: {canonical} stands; withdrawal of {} duplicate(s) requested.",
            withdrawals.len()
        ),
        Disposition::AcceptUnresolved => {
            format!("Resolved: {canonical} stands; the duplicate is accepted as unresolved.")
        }
    };
    Ok(Done {
        message,
        step: row.step_id,
    })
}
