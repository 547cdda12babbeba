//! Receipts (docs/DESIGN.md §8): the typed conclusion that lets a step, and its dependants,
//! advance.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::guard::{GuardedError, guard};
use super::incident::open_duplicate_incident;
use crate::domain::ReceiptMethod;

/// A typed receipt about to be committed.
#[derive(Debug, Clone)]
pub struct NewReceipt<'a> {
    pub step: Uuid,
    pub request_key: &'a str,
    pub external_reference: &'a str,
    pub completion_state: &'a str,
    pub method: ReceiptMethod,
    pub result_summary: &'a Value,
    pub author: Option<&'a str>,
    pub evidence: Option<&'a str>,
    pub reason: Option<&'a str>,
}

/// What recording an accepted external reference did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptOutcome {
    /// The receipt was committed and the step succeeded.
    Committed { receipt: Uuid },
    /// The step already had this very reference: nothing to do (a redelivery).
    AlreadyRecorded,
    /// The step already had another reference: a duplicate-effect incident holds both.
    Duplicate { incident: Uuid, existing: String },
}

/// Checkpoint 6: commits the receipt and marks the step succeeded, unless the step already
/// has a receipt — then the same reference is a no-op and another opens an incident.
/// `worker` guards the write when the caller holds a lease; `None` is for operator actions,
/// which lock the step row themselves.
pub async fn commit_receipt(
    conn: &mut PgConnection,
    worker: Option<&str>,
    receipt: &NewReceipt<'_>,
) -> Result<ReceiptOutcome, GuardedError> {
    let existing = sqlx::query!(
        r#"select r.external_reference from step s join receipt r on r.id = s.receipt_id
           where s.id = $1"#,
        receipt.step
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(existing) = existing {
        if existing.external_reference == receipt.external_reference {
            return Ok(ReceiptOutcome::AlreadyRecorded);
        }
        let incident = open_duplicate_incident(
            conn,
            receipt.step,
            &[
                (existing.external_reference.as_str(), None),
                (receipt.external_reference, Some(receipt.request_key)),
            ],
        )
        .await?;
        return Ok(ReceiptOutcome::Duplicate {
            incident,
            existing: existing.external_reference,
        });
    }
    let id = Uuid::now_v7();
    // One round trip: the receipt and the step that now points at it. A lost lease leaves no
    // row updated and the caller's transaction rolls the receipt back with it.
    let rows = sqlx::query_scalar!(
        r#"with locked as (
               -- The workflow row first, as every transaction that settles one of its steps
               -- takes it: the receipt's foreign key would otherwise share-lock it, and two steps
               -- finishing at once would each wait for the other's share lock to update it.
               select w.id from workflow w join step s on s.workflow_id = w.id
               where s.id = $10 for update of w
           ), receipted as (
               insert into receipt (id, step_id, workflow_id, definition_version, input_digest, request_key,
                                    adapter, contract_version, external_reference, completion_state, method,
                                    observed_at, result_summary, author, evidence, reason)
               select $1, s.id, s.workflow_id, s.definition_version, q.input_digest, q.request_key,
                      q.adapter, q.contract_version, $3, $4, $5::text::receipt_method, now(), $6, $7, $8, $9
               from step s join external_request q on q.request_key = $2 join locked on locked.id = s.workflow_id
               where s.id = $10
               returning id
           ), succeeded as (
               update step set state = 'succeeded', receipt_id = (select id from receipted), lease_holder = null,
                               lease_id = null, unknown_since = null, updated_at = now()
               where id = $10 and ($11::text is null or lease_holder = $11)
                 and exists (select 1 from receipted)
               returning id
           )
           select count(*) as "n!" from succeeded"#,
        id,
        receipt.request_key,
        receipt.external_reference,
        receipt.completion_state,
        receipt.method.as_str(),
        receipt.result_summary,
        receipt.author,
        receipt.evidence,
        receipt.reason,
        receipt.step,
        worker,
    )
    .fetch_one(conn)
    .await?;
    let rows = u64::try_from(rows).unwrap_or(0);
    guard(rows, receipt.step)?;
    Ok(ReceiptOutcome::Committed { receipt: id })
}
