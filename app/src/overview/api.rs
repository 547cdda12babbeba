use leptos::prelude::*;

use super::types::{ArchiveStanding, Outcomes, StateCount};
use crate::error::ConsoleError;

/// The number of workflows in every state, zero included, in the console's order; then step
/// outcomes per logical step, duplicate incidents and the age of unknown outcomes. Read at
/// once, for a signed-in viewer.
#[server(prefix = "/fn")]
pub async fn overview_figures() -> Result<(Vec<StateCount>, Outcomes), ConsoleError> {
    use engine::domain::WorkflowState;

    crate::auth::api::session::require(engine::domain::Role::Viewer).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let s = engine::read::stats::outcome_stats(&pool).await?;
    let counts = WorkflowState::ALL
        .into_iter()
        .map(|state| StateCount {
            state,
            count: s
                .workflows
                .iter()
                .find_map(|&(s, n)| (s == state).then_some(n))
                .unwrap_or(0),
        })
        .collect();
    let outcomes = Outcomes {
        by_step: s.by_step,
        duplicates_open: s.duplicates_open,
        duplicates_resolved: s.duplicates_resolved,
        unknown_age: s.unknown_age,
    };
    Ok((counts, outcomes))
}

/// What the archiver has moved, its last turn, and the oldest settled workflow still hot; for
/// a signed-in viewer.
#[server(prefix = "/fn")]
pub async fn archive_card() -> Result<ArchiveStanding, ConsoleError> {
    crate::auth::api::session::require(engine::domain::Role::Viewer).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let mut conn = pool.acquire().await?;
    let (workflows, audit_entries, events, bytes, last_at, last_secs) =
        engine::store::archive::progress(&mut conn).await?;
    let oldest = engine::store::archive::oldest_settled_age_secs(&mut conn).await?;
    Ok(ArchiveStanding {
        workflows,
        audit_entries,
        events,
        bytes,
        last_turn: last_at
            .map(|at| format!("{} ({last_secs:.1} s)", at.format("%Y-%m-%d %H:%M UTC"))),
        oldest_settled_days: oldest.map(|secs| secs / 86_400.0),
    })
}
