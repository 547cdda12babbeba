//! The claim's pacing of calls to limited adapters (docs/DESIGN.md §20): for each adapter with
//! a limit, its pace row is locked (in name order, so two claims never wait on each other in a
//! circle), [`crate::domain::limits::schedule`] admits what the rate and the places in flight
//! allow, and the rest wait in the queue for their turn. A call admitted with a moment in the
//! future takes its checkpoint 3 just before that moment (`call.rs`), not in the claim's commit.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::claim::Judged;
use super::{Worker, WorkerError};
use crate::domain::Limits;
use crate::domain::limits::schedule;
use crate::store::pace;

impl Worker {
    /// The judged steps with the calls of limited adapters paced: admitted ones carry their
    /// moment to leave at, the others are postponed.
    pub(super) async fn pace(
        &self,
        conn: &mut sqlx::PgConnection,
        lease: Uuid,
        judged: Vec<Judged>,
    ) -> Result<Vec<Judged>, WorkerError> {
        let mut limited: BTreeMap<&str, (Limits, Vec<usize>)> = BTreeMap::new();
        for (i, j) in judged.iter().enumerate() {
            if let Judged::Call(call) = j
                && !call.limits.is_unlimited()
            {
                let name = call.step.adapter.as_deref().unwrap_or_default();
                limited
                    .entry(name)
                    .or_insert((call.limits, Vec::new()))
                    .1
                    .push(i);
            }
        }
        let mut turns: HashMap<usize, Turn> = HashMap::new();
        for (name, (limits, calls)) in limited {
            let (now, read_at) = pace::lock(conn, name).await?;
            // The moments count from when the database read the pace, as this worker's clock
            // has it: a round trip after, so a call never leaves before its moment.
            let read_here = Instant::now();
            let plan = schedule(limits, now, calls.len());
            let (admitted, waiting) = calls.split_at(plan.admitted.len());
            let places: Vec<Uuid> = match limits.in_flight {
                Some(_) => admitted.iter().map(|&i| step_of(&judged[i])).collect(),
                None => Vec::new(),
            };
            pace::admit(conn, name, (read_at, plan.next_after), lease, &places).await?;
            turns.extend(
                admitted
                    .iter()
                    .zip(&plan.admitted)
                    .map(|(&i, &after)| (i, Turn::At(read_here + after, after.is_zero()))),
            );
            turns.extend(
                waiting
                    .iter()
                    .zip(&plan.postponed)
                    .map(|(&i, &w)| (i, Turn::Wait(w))),
            );
        }
        Ok(judged
            .into_iter()
            .enumerate()
            .map(|(i, j)| match (turns.get(&i), j) {
                (Some(Turn::At(at, now)), Judged::Call(mut call)) => {
                    call.leave_at = Some(*at);
                    call.invoked = call.invoked && *now;
                    Judged::Call(call)
                }
                (Some(Turn::Wait(wait)), Judged::Call(call)) => {
                    Judged::Postponed(call.step, wait.as_secs_f64())
                }
                (_, j) => j,
            })
            .collect())
    }
}

/// A paced call's turn: its moment to leave at (and whether that is at once), or how long it
/// waits queued.
enum Turn {
    At(Instant, bool),
    Wait(Duration),
}

fn step_of(judged: &Judged) -> Uuid {
    match judged {
        Judged::Call(call) => call.step.id,
        _ => unreachable!("only calls are paced"),
    }
}
