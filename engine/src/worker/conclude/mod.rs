//! Checkpoints 5 and 6, transaction C, for many steps at once (docs/DESIGN.md §4): the concluder
//! gathers results for a few milliseconds, longer while calls are in flight (or until a
//! batch's worth arrived), and settles them in one transaction of set-based statements:
//! receipts (carrying the accepted observation) or the observations that end the attempts, the
//! steps' new states, dependants released, and the outbox events with each workflow's state,
//! all driven by the rows the guarded update returned. A result the set-based path cannot
//! settle (its lease was lost, the step already has a receipt, or a row the database refuses)
//! goes through the one-step path (`alone.rs`), so one bad row never takes the others down, and
//! no observation of a call is lost.

mod alone;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::call::{Conclusion, Finished};
use super::{StepReport, Worker, WorkerError, settled_state};
use crate::adapter::Adapter;
use crate::definition::{Catalog, CatalogError};
use crate::domain::words::{DuplicateStatus, StepWords, sentences_by_state, status_sentence};
use crate::domain::{
    AcceptedReceipt, EventKind, RequestKey, StepState, TransportObservation, event,
};
use crate::store::batch;
use crate::store::conclusion::{self, Announcing, NewBatchReceipt, Settling};
use crate::store::projection::{self, KeptStatus};
use crate::store::step::{Claimed, Settle};

/// How long the concluder waits for more results before it settles what it has, when no
/// other call is in flight.
const FLUSH_EVERY: Duration = Duration::from_millis(5);

/// How long it waits while other calls are in flight: their results are on their way, and a
/// flush of 30 costs nearly what a flush of 64 does.
const FLUSH_BUSY: Duration = Duration::from_millis(20);

/// Settles results in batches until every sender is gone.
pub(super) struct Concluder {
    pub worker: Worker,
    pub results: mpsc::Receiver<Finished>,
    /// The worker's leases: those whose every step has been concluded are dropped with the
    /// next flush.
    pub leases: super::leases::Leases,
}

impl Concluder {
    /// Runs until every sender has gone and every result is settled.
    pub async fn run(mut self) {
        let most = usize::try_from(self.worker.config.batch.max(1)).unwrap_or(64);
        while let Some(first) = self.results.recv().await {
            let mut items = vec![first];
            let window = if self.worker.calls_in_flight() > 0 {
                FLUSH_BUSY
            } else {
                FLUSH_EVERY
            };
            let until = tokio::time::Instant::now() + window;
            while items.len() < most {
                tokio::select! {
                    next = self.results.recv() => match next {
                        Some(item) => items.push(item),
                        None => break,
                    },
                    () = tokio::time::sleep_until(until) => break,
                }
            }
            let done = self.leases.take_done();
            self.worker.flush(items, &done).await;
        }
    }
}

/// A result as the set-based statements take it, with its event.
struct Prepared {
    settling: Settling,
    workflow: Uuid,
    event: (EventKind, Value),
    /// The step's logical name and its definition's name and version: what keeping the status
    /// projection needs.
    logical: String,
    definition: (String, i32),
}

impl Worker {
    /// Settles `items` together; what the set-based path leaves goes one at a time.
    pub(super) async fn flush(&self, items: Vec<Finished>, done_leases: &[Uuid]) {
        let prepared: Vec<Prepared> = items
            .iter()
            .map(|f| {
                let expected = if f.step.state == StepState::Invoking {
                    StepState::Invoking
                } else {
                    StepState::Running
                };
                self.prepare(&f.step, Some(f.lease), Some(expected), &f.conclusion)
            })
            .collect();
        let settled = match self.settle_many(&prepared, done_leases).await {
            Ok(settled) => settled,
            Err(error) => {
                tracing::warn!(%error, results = items.len(), "a batch of results could not settle together; settling each alone");
                BTreeSet::new()
            }
        };
        for (item, prepared) in items.into_iter().zip(prepared) {
            let report = if settled.contains(&item.step.id) {
                Ok(report_of(&prepared))
            } else {
                self.conclude_alone(item.step, item.conclusion).await
            };
            let _ = item.reply.send(report);
        }
    }

    /// [`Worker::settle`] in a transaction of its own, which also drops `done_leases`.
    async fn settle_many(
        &self,
        prepared: &[Prepared],
        done_leases: &[Uuid],
    ) -> Result<BTreeSet<Uuid>, WorkerError> {
        let mut tx = self.pool.begin().await?;
        let settled = self.settle(&mut tx, prepared).await?;
        if !done_leases.is_empty() {
            batch::drop_leases(&mut tx, self.name(), done_leases).await?;
        }
        tx.commit().await?;
        crate::failpoint::hit(crate::failpoint::FaultPoint::AfterReceiptBeforeAck);
        Ok(settled)
    }

    /// Checkpoints 5 and 6 for `prepared`, in the caller's transaction: the one way an attempt
    /// settles, for a flush of many and for one result alone. Locks the workflows in id order,
    /// writes each receipt or ending observation and moves each step still held (one
    /// statement), releases dependants, announces the events with each workflow's state, and
    /// keeps the status projection current. Returns the steps it settled; the others were left
    /// untouched.
    async fn settle(
        &self,
        tx: &mut sqlx::PgConnection,
        prepared: &[Prepared],
    ) -> Result<BTreeSet<Uuid>, WorkerError> {
        let owners: BTreeSet<Uuid> = prepared.iter().map(|p| p.workflow).collect();
        let owners: Vec<Uuid> = owners.into_iter().collect();
        let revisions = conclusion::lock_workflows(&mut *tx, &owners).await?;
        let settlings: Vec<Settling> = prepared.iter().map(|p| p.settling.clone()).collect();
        let settled = conclusion::settle(&mut *tx, self.name(), &settlings).await?;
        let settled_steps: BTreeSet<Uuid> = settled.iter().map(|(s, _)| *s).collect();
        let touched: BTreeSet<Uuid> = settled.iter().map(|(_, w)| *w).collect();
        let touched: Vec<Uuid> = touched.into_iter().collect();
        if touched.is_empty() {
            return Ok(settled_steps);
        }
        let released: BTreeSet<Uuid> = prepared
            .iter()
            .filter(|p| {
                settled_steps.contains(&p.settling.step) && p.settling.next == StepState::Succeeded
            })
            .map(|p| p.workflow)
            .collect();
        if !released.is_empty() {
            let released: Vec<Uuid> = released.into_iter().collect();
            conclusion::release_dependants(&mut *tx, &released).await?;
        }
        let events: Vec<Announcing> = prepared
            .iter()
            .filter(|p| settled_steps.contains(&p.settling.step))
            .map(|p| Announcing {
                event_id: Uuid::now_v7(),
                workflow: p.workflow,
                kind: p.event.0.as_str(),
                payload: p.event.1.clone(),
            })
            .collect();
        let spare: Vec<Uuid> = touched.iter().map(|_| Uuid::now_v7()).collect();
        conclusion::announce(&mut *tx, &events, &touched, &spare).await?;
        let kept = status_kept(&mut *tx, prepared, &settled_steps, &revisions).await?;
        if !kept.is_empty() {
            projection::keep_statuses(&mut *tx, &kept).await?;
        }
        Ok(settled_steps)
    }

    /// How [`Worker::settle`] takes `conclusion` of `step`, claimed under `lease` and expected
    /// in `expected` (none: under any lease of this worker, in any state), and its event.
    fn prepare(
        &self,
        step: &Claimed,
        lease: Option<Uuid>,
        expected: Option<StepState>,
        conclusion: &Conclusion,
    ) -> Prepared {
        let (settling, event) = match conclusion {
            Conclusion::Pure { output } => (
                Settling {
                    step: step.id,
                    lease,
                    expected: Some(StepState::Running),
                    attempt: None,
                    request_key: None,
                    outcome: None,
                    observation: None,
                    receipt: None,
                    next: StepState::Succeeded,
                    delay_ms: 0,
                    output: Some(output.clone()),
                },
                (
                    EventKind::StepSucceeded,
                    event::pure_step_succeeded(step.id, &step.logical),
                ),
            ),
            Conclusion::Observed {
                attempt,
                key,
                adapter,
                observation,
            } => {
                let attempt = Attempted {
                    attempt: *attempt,
                    key,
                    adapter: adapter.as_ref(),
                    observation,
                };
                self.observed_settling(step, lease, expected, &attempt)
            }
        };
        prepared(step, (settling, event))
    }

    /// [`Worker::prepare`] for an attempt that observed something: a receipt if it was
    /// accepted, else where the step goes by its contract.
    fn observed_settling(
        &self,
        step: &Claimed,
        lease: Option<Uuid>,
        expected: Option<StepState>,
        attempted: &Attempted<'_>,
    ) -> (Settling, (EventKind, Value)) {
        let observation = attempted.observation;
        let outcome = observation.outcome();
        let accepted = AcceptedReceipt::of_answer(observation, step.withdraws.is_some());
        let method = accepted.as_ref().map(|r| r.method);
        let (receipt, next, delay_ms) = match accepted {
            Some(accepted) => {
                let receipt = NewBatchReceipt {
                    id: Uuid::now_v7(),
                    external_reference: accepted.external_reference,
                    method: accepted.method,
                    completion_state: accepted.completion_state,
                    summary: accepted.summary,
                };
                (Some(receipt), StepState::Succeeded, 0)
            }
            None => {
                let settle = self.settle_after(step, attempted.adapter, observation, outcome);
                (None, settled_state(settle), delay_of(settle))
            }
        };
        let settling = Settling {
            step: step.id,
            lease,
            expected,
            attempt: Some(attempted.attempt),
            request_key: Some(attempted.key.as_str().to_owned()),
            outcome: Some(outcome),
            observation: Some(
                serde_json::to_value(observation).expect("an observation serializes"),
            ),
            receipt,
            next,
            delay_ms,
            output: None,
        };
        let event = json!({
            "step": step.id, "outcome": outcome, "state": next,
            "logical": step.logical, "adapter": step.adapter, "method": method,
        });
        (settling, (EventKind::StepAttemptEnded, event))
    }
}

/// `step`'s result as [`Worker::settle`] takes it.
fn prepared(step: &Claimed, (settling, event): (Settling, (EventKind, Value))) -> Prepared {
    Prepared {
        settling,
        workflow: step.workflow_id,
        event,
        logical: step.logical.clone(),
        definition: (step.definition_name.clone(), step.definition_version),
    }
}

/// An attempt and what it observed, as settling reads it.
struct Attempted<'a> {
    attempt: Uuid,
    key: &'a RequestKey,
    adapter: &'a dyn Adapter,
    observation: &'a TransportObservation,
}

/// A definition's status step, its words, and its sentence in each state.
struct StatusWords {
    step: String,
    words: StepWords,
    sentences: Value,
}

/// What the flush knows of each workflow it settled steps of, for keeping its status projection
/// in the same transaction (docs/DESIGN.md §10): the revision before, the status step's
/// sentences, and the sentence of a status step it settled with a receipt. A workflow whose
/// definition cannot be had here is left to the status consumer.
async fn status_kept(
    conn: &mut sqlx::PgConnection,
    prepared: &[Prepared],
    settled: &BTreeSet<Uuid>,
    revisions: &[(Uuid, i64)],
) -> Result<Vec<KeptStatus>, WorkerError> {
    // Each definition's, worked out once a flush (none: the definition cannot be had here).
    let mut said: HashMap<&(String, i32), Option<StatusWords>> = HashMap::new();
    let mut kept = Vec::new();
    for (workflow, before) in revisions {
        let mine: Vec<&Prepared> = prepared
            .iter()
            .filter(|p| p.workflow == *workflow && settled.contains(&p.settling.step))
            .collect();
        let Some(first) = mine.first() else { continue };
        if !said.contains_key(&first.definition) {
            let (name, version) = &first.definition;
            let words = match Catalog::get(&mut *conn, name, *version).await {
                Ok(definition) => {
                    let step = definition.status_step().to_owned();
                    let words = definition.words(&step);
                    let sentences = sentences_by_state(&words);
                    Some(StatusWords {
                        step,
                        words,
                        sentences,
                    })
                }
                Err(CatalogError::Sqlx(e)) => return Err(e.into()),
                Err(_) => None,
            };
            said.insert(&first.definition, words);
        }
        let Some(StatusWords {
            step: status_step,
            words,
            sentences,
        }) = &said[&first.definition]
        else {
            continue;
        };
        let settled = mine
            .iter()
            .filter(|p| &p.logical == status_step)
            .find_map(|p| {
                let reference = p.settling.receipt.as_ref()?.external_reference.as_str();
                let sentence = status_sentence(
                    words,
                    StepState::Succeeded,
                    Some(reference),
                    DuplicateStatus::None,
                );
                Some((p.settling.step, sentence))
            });
        kept.push(KeptStatus {
            workflow: *workflow,
            before: *before,
            status_step: status_step.clone(),
            sentences: sentences.clone(),
            settled,
        });
    }
    Ok(kept)
}

/// How long a settled step waits before it may be claimed again.
fn delay_of(settle: Settle) -> i64 {
    match settle {
        Settle::RetryAfter { millis } => millis,
        Settle::Unknown { recheck_millis } => recheck_millis,
        Settle::Review | Settle::Unsent | Settle::Rejected => 0,
    }
}

/// The report of a result the set-based path settled.
fn report_of(prepared: &Prepared) -> StepReport {
    match prepared.settling.outcome {
        None => StepReport::PureCompleted,
        Some(outcome) => StepReport::Settled {
            outcome,
            state: prepared.settling.next,
        },
    }
}
