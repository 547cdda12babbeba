//! `z29c note`: the engine's `recovery::note`, as the operator named with `--as`
//! (docs/DESIGN.md §20).

use engine::store::note::NoteOn;
use sqlx::PgPool;

use super::{Io, Stop, operator, print, refusal};
use crate::cli::ops::NoteArgs;

/// Writes the note and says where it went.
pub(super) async fn write(pool: &PgPool, args: &NoteArgs, io: &mut Io<'_>) -> Result<(), Stop> {
    let on = match (args.workflow, args.step, args.incident) {
        (Some(id), _, _) => NoteOn::Workflow(id),
        (_, Some(id), _) => NoteOn::Step(id),
        (_, _, Some(id)) => NoteOn::Incident(id),
        (None, None, None) => unreachable!("clap requires one of --workflow, --step, --incident"),
    };
    let by = operator(pool, &args.operator).await?;
    let note = engine::recovery::note::add_note(pool, &by, on, &args.text)
        .await
        .map_err(|e| refusal(e, "There is no such workflow, step or incident."))?;
    if args.output.json {
        return Ok(print::json(io.out, &note)?);
    }
    Ok(writeln!(
        io.out,
        "Noted on {} by {} at {}.",
        match on {
            NoteOn::Workflow(id) => format!("workflow {id}"),
            NoteOn::Step(id) => format!("step {id}"),
            NoteOn::Incident(id) => format!("incident {id}"),
        },
        note.author,
        print::time(note.at)
    )?)
}
