//! Notes (docs/DESIGN.md §20): any operator leaves a sentence on a workflow, a step or an
//! incident for the next person ("checked with the provider's support, ticket 4411"). A note
//! is an audit entry: attributed, append-only, shown in the step's timeline and on the workflow
//! and incident pages, and it never changes a state.

use sqlx::PgPool;

use super::ActionError;
use super::admit::{admit_at_least, required};
use crate::domain::Role;
use crate::operators::Operator;
use crate::store::note::{self, Note, NoteOn};

/// The longest note kept.
const NOTE_CHARS: usize = 4000;

/// Adds `text` by `operator` to `on`. An operator or an approver may write one; a viewer reads.
pub async fn add_note(
    pool: &PgPool,
    operator: &Operator,
    on: NoteOn,
    text: &str,
) -> Result<Note, ActionError> {
    admit_at_least(operator.role, Role::Operator, "Writing a note")?;
    let text = required("The note", text, NOTE_CHARS)?;
    let mut tx = pool.begin().await?;
    let Some(place) = note::place(&mut tx, on).await? else {
        return Err(ActionError::NotFound);
    };
    let written = note::add(&mut tx, operator.actor(), on, place, &text).await?;
    tx.commit().await?;
    Ok(written)
}
