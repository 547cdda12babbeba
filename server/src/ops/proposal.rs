//! `z29c proposal confirm ID` and `z29c proposal decline ID`: the second approver of an action
//! an adapter's file says needs two (docs/DESIGN.md §20), as `--as` names them.

use engine::recovery::four_eyes;
use sqlx::PgPool;

use super::{Io, Stop, operator, refusal};
use crate::cli::ops::ProposalCommand;

/// Confirms or declines the proposal and says what was done.
pub(super) async fn run(
    pool: &PgPool,
    command: ProposalCommand,
    io: &mut Io<'_>,
) -> Result<(), Stop> {
    let (id, acting, confirming) = match &command {
        ProposalCommand::Confirm { id, acting } => (*id, acting, true),
        ProposalCommand::Decline { id, acting } => (*id, acting, false),
    };
    let by = operator(pool, &acting.operator).await?;
    let done = if confirming {
        four_eyes::confirm(pool, &by, id, &acting.reason).await
    } else {
        four_eyes::decline(pool, &by, id, &acting.reason).await
    }
    .map_err(|e| refusal(e, "No proposal has this id."))?;
    if acting.output.json {
        let answer = serde_json::json!({ "message": done.message, "step": done.step });
        return Ok(writeln!(io.out, "{answer}")?);
    }
    Ok(writeln!(io.out, "{} (step {})", done.message, done.step)?)
}
