//! Checkpoint 1 (docs/DESIGN.md §4): lease a batch of due steps and record the attempts of fresh
//! ones in the same transaction.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::{Worker, WorkerError};
use crate::domain::StepState;
use crate::store::step::Claimed;
use crate::store::{attempt, lease, workflow};

impl Worker {
    /// Checkpoint 1: lease a batch and record the attempts of fresh ones.
    pub(super) async fn claim(&self) -> Result<Vec<Claimed>, WorkerError> {
        let mut tx = self.pool.begin().await?;
        let mut claimed = lease::claim(
            &mut tx,
            &self.config.name,
            self.config.batch,
            self.lease_secs(),
        )
        .await?;
        // Fresh claims get their attempt now, in this transaction; it rides along with the step.
        for c in claimed.iter_mut().filter(|c| c.state == StepState::Running) {
            c.attempt = Some(Uuid::now_v7());
        }
        let fresh: Vec<&Claimed> = claimed.iter().filter(|c| c.attempt.is_some()).collect();
        if !fresh.is_empty() {
            self.record_attempts(&mut tx, &fresh).await?;
        }
        // Only a workflow that had not started changes state when one of its steps is claimed.
        let pending: BTreeSet<Uuid> = claimed
            .iter()
            .filter(|c| c.workflow_pending)
            .map(|c| c.workflow_id)
            .collect();
        for workflow_id in pending {
            workflow::refresh_state(&mut tx, workflow_id).await?;
        }
        tx.commit().await?;
        Ok(claimed)
    }

    /// The attempt rows of freshly claimed steps; a later attempt consumes the operator's
    /// authorization it needs, if one was given.
    async fn record_attempts(
        &self,
        tx: &mut sqlx::PgConnection,
        fresh: &[&Claimed],
    ) -> Result<(), WorkerError> {
        let steps: Vec<Uuid> = fresh.iter().map(|c| c.id).collect();
        let attempts: Vec<Uuid> = fresh.iter().filter_map(|c| c.attempt).collect();
        let numbers: Vec<i32> = fresh.iter().map(|c| c.attempt_count).collect();
        // A first attempt needs no authorization; a later one may carry an operator's.
        let again: Vec<Uuid> = fresh
            .iter()
            .filter(|c| c.attempt_count > 1)
            .map(|c| c.id)
            .collect();
        let granted = if again.is_empty() {
            Vec::new()
        } else {
            attempt::consume_authorizations(tx, &again).await?
        };
        let authorizations: Vec<Option<Uuid>> = steps
            .iter()
            .map(|s| granted.iter().find(|(g, _)| g == s).map(|(_, a)| *a))
            .collect();
        attempt::insert_attempts(
            tx,
            &self.config.name,
            self.lease_secs(),
            &steps,
            &attempts,
            &numbers,
            &authorizations,
        )
        .await?;
        Ok(())
    }

    /// The open attempt of a step claimed without one (an operator's retry made it ready).
    pub(super) async fn open_attempt(&self, step: &Claimed) -> Result<Uuid, WorkerError> {
        Ok(attempt::open_attempt(&self.pool, step.id).await?)
    }
}
