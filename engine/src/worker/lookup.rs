//! Asking the destination by client reference, and what its answer settles (docs/DESIGN.md §6).
//! Workers reach this through recovery; operators' *Check destination* through
//! [`check_destination`], on a step leased to them. Both record the lookup as an observation
//! and map it to the decision table's fact through [`LookupAnswer::from_observation`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::identity::{bind_regenerated, prepare};
use super::{StepReport, WorkerError, adapter_for, request_key};
use crate::adapter::registry::Adapters;
use crate::adapter::{Adapter, BoxFuture, LookupObservation};
use crate::domain::{
    AcceptedReceipt, EventKind, LookupAnswer, ObservationKind, ReceiptMethod, RequestKey, StepState,
};
use crate::failpoint::{self, FaultPoint};
use crate::store::receipt::{self, NewReceipt, ReceiptOutcome};
use crate::store::step::{self, Claimed, Settle};
use crate::store::{attempt, incident, lease, request, workflow};

/// A step held under a lease by `holder` (a worker, or an operator's check): what the lookup and
/// the receipts it may commit need to know.
#[derive(Clone)]
pub struct Hold<'a> {
    pub pool: &'a PgPool,
    pub holder: &'a str,
    pub lease: Duration,
    pub adapters: std::sync::Arc<Adapters>,
    /// When the lookup is judged against the visibility window: `None` is the database's
    /// clock; tests pass a time instead of waiting for one.
    pub now: Option<DateTime<Utc>>,
}

/// An operator's *Check destination* on a step leased to `holder`: one lookup, acted on as the
/// decision table says for what it found. Anything short of a found delivery that has settled
/// leaves the step where it was, with the answer on its timeline; the next decision (check
/// again, retry after authoritative absence) is the operator's. `None`: the destination holds
/// several deliveries for the request, and an incident is open.
pub async fn check_destination(
    pool: &PgPool,
    adapters: std::sync::Arc<Adapters>,
    step: &Claimed,
    holder: &str,
    lease: Duration,
    now: Option<DateTime<Utc>>,
) -> Result<Option<LookupAnswer>, WorkerError> {
    let (adapter, _) = adapter_for(&adapters, step)?;
    let hold = Hold {
        pool,
        holder,
        lease,
        adapters,
        now,
    };
    let key = request_key(step);
    let (answer, _) = hold.look_up(step, adapter.as_ref(), &key).await?;
    let settled = |found: &LookupAnswer| found.index_settles_in_ms(adapter.contract()) == 0;
    match &answer {
        None => {}
        Some(
            found @ LookupAnswer::Found {
                external_reference,
                digest_matches: true,
                ..
            },
        ) if settled(found) => {
            hold.verified(step, &key, external_reference).await?;
        }
        Some(LookupAnswer::Found {
            external_reference,
            digest_matches: false,
            ..
        }) => {
            hold.digest_conflict(step, &key, external_reference).await?;
        }
        Some(_) => {
            let mut conn = pool.acquire().await?;
            lease::release_lease(&mut conn, step.id, holder).await?;
        }
    }
    Ok(answer)
}

/// What the lookup compares the destination's answer with: the bound request.
struct Bound {
    request_digest: String,
    content_digest: String,
    looked_after_sent_ms: i64,
    /// The step's request as rendered when its identity was bound, for a lookup that reads
    /// it; `Err` says why it cannot be had (it no longer regenerates to the bound bytes).
    request: Result<Value, String>,
}

impl Hold<'_> {
    fn lease_secs(&self) -> f64 {
        self.lease.as_secs_f64()
    }

    /// Awaits `call`, renewing the lease every third of its length meanwhile.
    pub(super) async fn call_renewing<T>(&self, step: Uuid, call: BoxFuture<'_, T>) -> T {
        let mut call = call;
        let mut renew = tokio::time::interval(self.lease / 3);
        renew.tick().await;
        loop {
            tokio::select! {
                result = &mut call => return result,
                _ = renew.tick() => {
                    if let Err(error) = lease::renew_lease(self.pool, step, self.holder, self.lease_secs()).await {
                        tracing::warn!(%error, %step, "lease renewal failed during a call");
                    }
                }
            }
        }
    }

    /// A status lookup, recorded as an observation; returns the answer for the decision table,
    /// or `None` when the lookup itself settled the step (several references: an incident).
    #[tracing::instrument(name = "adapter.lookup", skip_all, fields(adapter = step.adapter.as_deref().unwrap_or_default()))]
    pub(super) async fn look_up(
        &self,
        step: &Claimed,
        adapter: &dyn Adapter,
        key: &RequestKey,
    ) -> Result<(Option<LookupAnswer>, StepReport), WorkerError> {
        let bound = self.bound_request(step, adapter, key).await?;
        let seen = match &bound.request {
            Ok(request) => {
                self.call_renewing(step.id, adapter.lookup(key, &bound.content_digest, request))
                    .await
            }
            Err(why) => LookupObservation::Unavailable {
                detail: why.clone(),
            },
        };
        failpoint::hit(FaultPoint::DuringStatusQuery);
        let mut tx = self.pool.begin().await?;
        lease::renew_lease(&mut *tx, step.id, self.holder, self.lease_secs()).await?;
        let body = json!({
            "seen": seen, "request_digest": bound.request_digest,
            "bound_digest": bound.content_digest, "looked_after_sent_ms": bound.looked_after_sent_ms,
        });
        attempt::record_observation(
            &mut tx,
            step.id,
            None,
            Some(key.as_str()),
            ObservationKind::Lookup,
            &body,
        )
        .await?;
        if let LookupObservation::Found {
            external_reference,
            all,
            ..
        } = &seen
            && all.len() > 1
        {
            self.several(&mut tx, step, key, external_reference, all)
                .await?;
            tx.commit().await?;
            return Ok((
                None,
                StepReport::Looked {
                    answer: "found several".into(),
                    state: StepState::Succeeded,
                },
            ));
        }
        tx.commit().await?;
        let answer = LookupAnswer::from_observation(
            &seen,
            &bound.content_digest,
            bound.looked_after_sent_ms,
        );
        Ok((Some(answer), StepReport::ToReview))
    }

    /// The request the lookup compares with, and how long the destination's index has had
    /// since it was last sent (taken before the lookup leaves, so it can only understate it).
    async fn bound_request(
        &self,
        step: &Claimed,
        adapter: &dyn Adapter,
        key: &RequestKey,
    ) -> Result<Bound, WorkerError> {
        let mut conn = self.pool.acquire().await?;
        let deadline_ms = i64::try_from(adapter.contract().deadline_ms).unwrap_or(i64::MAX);
        let mut regenerated = None;
        let (request_digest, summary, since_ms) =
            match request::request_identity(&mut conn, key.as_str()).await? {
                Some((digest, summary)) => {
                    let since = attempt::millis_since_last_call_ended(
                        &mut conn,
                        step.id,
                        key.as_str(),
                        deadline_ms,
                        self.now,
                    )
                    .await?;
                    (digest, summary, since)
                }
                // Restored from a backup older than the request identity: regenerate the request,
                // and count the time since the step was found, less a deadline, as the index's.
                None => {
                    let prepared = prepare(&mut conn, step, key, adapter).await?;
                    let found = step.unknown_since.map_or(0, |at| {
                        (self.now.unwrap_or_else(Utc::now) - at).num_milliseconds()
                    });
                    let bound = (
                        prepared.request_digest.to_string(),
                        prepared.summary.clone(),
                        found - deadline_ms,
                    );
                    regenerated = Some(prepared);
                    bound
                }
            };
        // A lookup that reads the request (by customer, by order) gets it regenerated from the
        // immutable inputs, and only when it is the very request bound to the key.
        let request = if adapter.lookup_reads_request() {
            let prepared = match regenerated {
                Some(prepared) => prepared,
                None => prepare(&mut conn, step, key, adapter).await?,
            };
            if prepared.request_digest.as_str() == request_digest {
                Ok(prepared.request)
            } else {
                Err(format!(
                    "the request regenerated now ({}) is not the one bound to the key ({request_digest}), so the lookup cannot read its fields",
                    prepared.request_digest
                ))
            }
        } else {
            Ok(Value::Null)
        };
        let content_digest = summary["digest"].as_str().unwrap_or_default().to_owned();
        if content_digest.is_empty() {
            return Err(
                sqlx::Error::Decode("the bound request has no content digest".into()).into(),
            );
        }
        Ok(Bound {
            request_digest,
            content_digest,
            looked_after_sent_ms: since_ms,
            request,
        })
    }

    /// The destination holds several deliveries for the request: the incident first (dependants
    /// stay blocked while it is open), then the receipt of the first.
    async fn several(
        &self,
        tx: &mut PgConnection,
        step: &Claimed,
        key: &RequestKey,
        external_reference: &str,
        all: &[String],
    ) -> Result<(), WorkerError> {
        let refs: Vec<(&str, Option<&str>)> = all
            .iter()
            .map(|r| (r.as_str(), Some(key.as_str())))
            .collect();
        incident::open_duplicate_incident(tx, step.id, &refs).await?;
        self.record_reference(
            tx,
            step,
            key,
            external_reference,
            ReceiptMethod::StatusQuery,
            &json!({ "lookup": "found", "all": all }),
        )
        .await?;
        workflow::refresh_state(tx, step.workflow_id).await?;
        Ok(())
    }

    /// Commits the receipt for an accepted reference (or opens a duplicate incident).
    pub(super) async fn record_reference(
        &self,
        tx: &mut PgConnection,
        step: &Claimed,
        key: &RequestKey,
        external_reference: &str,
        method: ReceiptMethod,
        summary: &Value,
    ) -> Result<StepState, WorkerError> {
        // Found by a lookup after a restore older than the request identity: the regenerated
        // request the lookup compared is the one the receipt names.
        if method == ReceiptMethod::StatusQuery {
            let (adapter, contract_version) = adapter_for(&self.adapters, step)?;
            bind_regenerated(tx, step, key, adapter.as_ref(), contract_version).await?;
        }
        let receipt = NewReceipt {
            step: step.id,
            request_key: key.as_str(),
            external_reference,
            completion_state: AcceptedReceipt::completion_state(step.withdraws.is_some()),
            method,
            result_summary: summary,
            author: None,
            evidence: None,
            reason: None,
        };
        match receipt::commit_receipt(tx, Some(self.holder), &receipt).await? {
            ReceiptOutcome::Committed { .. } => {
                step::release_dependants(tx, step.workflow_id).await?;
            }
            ReceiptOutcome::AlreadyRecorded | ReceiptOutcome::Duplicate { .. } => {
                lease::release_lease(tx, step.id, self.holder).await?;
            }
        }
        Ok(StepState::Succeeded)
    }

    /// The lookup found the request under its digest: a `status_query` receipt settles the step.
    #[tracing::instrument(name = "checkpoint.verified", skip_all)]
    pub(super) async fn verified(
        &self,
        step: &Claimed,
        key: &RequestKey,
        external_reference: &str,
    ) -> Result<StepReport, WorkerError> {
        let mut tx = self.pool.begin().await?;
        let summary = json!({ "lookup": "found" });
        let state = self
            .record_reference(
                &mut tx,
                step,
                key,
                external_reference,
                ReceiptMethod::StatusQuery,
                &summary,
            )
            .await?;
        workflow::announce(
            &mut tx,
            step.workflow_id,
            EventKind::StepVerified,
            &json!({
                "step": step.id, "external_reference": external_reference, "method": ReceiptMethod::StatusQuery,
                "logical": step.logical, "adapter": step.adapter,
            }),
        )
        .await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        Ok(StepReport::Looked {
            answer: "found".into(),
            state,
        })
    }

    /// The lookup found the key under other bytes: an integrity incident, and a person decides.
    pub(super) async fn digest_conflict(
        &self,
        step: &Claimed,
        key: &RequestKey,
        external_reference: &str,
    ) -> Result<StepReport, WorkerError> {
        let mut tx = self.pool.begin().await?;
        incident::open_digest_conflict(
            &mut tx,
            step.id,
            external_reference,
            key.as_str(),
            &json!({ "lookup": "found_with_conflicting_digest" }),
        )
        .await?;
        step::settle(&mut tx, step.id, Some(self.holder), Settle::Review).await?;
        workflow::refresh_state(&mut tx, step.workflow_id).await?;
        tx.commit().await?;
        Ok(StepReport::ToReview)
    }
}
