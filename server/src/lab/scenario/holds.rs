//! `z29c scenario soak --hold-every MS`: an approver holds a random destination's adapter
//! mid-run, calls in flight, and resumes it one interval later; one hold at a time. Each hold
//! is judged from outside (docs/DESIGN.md §20): no attempt began after the hold committed, and
//! the destination's own ledger took no new effect between the end of the calls in flight and
//! the resume.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use engine::domain::Role;
use engine::recovery::hold::{hold_adapter, resume_adapter};
use engine::store::journal::Actor;
use sqlx::PgPool;

use super::target::Running;

/// How long after a hold the calls claimed before it may still reach the destination: the
/// longest deadline of the harness's adapters, with room to spare.
const DRAIN: Duration = Duration::from_secs(6);

const SOAK: (Actor<'static>, Role) = (Actor::Engine("soak"), Role::Approver);

/// The hold in force, if any, and what the holds so far found.
pub(super) struct Holds {
    every: Duration,
    next: Instant,
    current: Option<Hold>,
    pub(super) taken: usize,
    pub(super) violations: Vec<String>,
}

/// One hold: on which destination, since when (by the database's clock, once committed), and
/// the destination's effects once the calls in flight had ended.
struct Hold {
    destination: usize,
    adapter: &'static str,
    committed_at: DateTime<Utc>,
    began: Instant,
    drained: Option<usize>,
}

impl Holds {
    pub(super) fn every(every: Duration) -> Self {
        Self {
            every,
            next: Instant::now() + every,
            current: None,
            taken: 0,
            violations: Vec::new(),
        }
    }

    /// Takes the ledger's count once a hold has drained; holds or resumes when it is time.
    /// A failure (the database restarting) is tried again on the next tick.
    pub(super) async fn tick(
        &mut self,
        pool: &PgPool,
        destinations: &[Running],
        pick: usize,
    ) -> anyhow::Result<()> {
        if let Some(hold) = &mut self.current
            && hold.drained.is_none()
            && hold.began.elapsed() >= DRAIN
        {
            hold.drained = Some(destinations[hold.destination].effect_count().await?);
        }
        if Instant::now() < self.next {
            return Ok(());
        }
        if self.current.is_some() {
            self.resume(pool, destinations).await?;
        } else {
            let destination = pick % destinations.len();
            let adapter = destinations[destination].target.adapter();
            hold_adapter(pool, SOAK, adapter, "soak: the provider is down", true).await?;
            let committed_at = sqlx::query_scalar("select now()").fetch_one(pool).await?;
            self.current = Some(Hold {
                destination,
                adapter,
                committed_at,
                began: Instant::now(),
                drained: None,
            });
            self.taken += 1;
        }
        self.next = Instant::now() + self.every;
        Ok(())
    }

    /// Ends the hold in force, judging it first.
    pub(super) async fn resume(
        &mut self,
        pool: &PgPool,
        destinations: &[Running],
    ) -> anyhow::Result<()> {
        let Some(hold) = &self.current else {
            return Ok(());
        };
        let began: i64 = sqlx::query_scalar(
            "select count(*) from attempt_start a join step s on s.id = a.step_id
             where s.adapter = $1 and a.started_at > $2",
        )
        .bind(hold.adapter)
        .bind(hold.committed_at)
        .fetch_one(pool)
        .await?;
        let effects = destinations[hold.destination].effect_count().await?;
        resume_adapter(pool, SOAK, hold.adapter, "soak: the provider is back", None).await?;
        if began > 0 {
            self.violations.push(format!(
                "{}: {began} attempt(s) began while it was held",
                hold.adapter
            ));
        }
        if let Some(drained) = hold.drained
            && effects != drained
        {
            self.violations.push(format!(
                "{}: its ledger took {} new effect(s) while it was held",
                hold.adapter,
                effects.saturating_sub(drained)
            ));
        }
        self.current = None;
        Ok(())
    }
}
