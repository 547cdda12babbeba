use leptos::prelude::*;
use leptos::server_fn::ServerFn;

use super::api::AddNote;
use super::types::{NoteForm, NoteLine};
use crate::forms::kept_or;

/// The form that leaves a note on `on` ("workflow", "step", "incident") `id`: a plain form,
/// which comes back to the page with the refusal and the text when the server refuses it.
#[component]
pub fn AddNoteForm(on: &'static str, id: String, form: NoteForm) -> impl IntoView {
    let refusal =
        form.kept.as_ref().and_then(|k| k.sentence()).map(
            |e| view! { <p class="notice error" role="alert" data-testid="note-refusal">{e}</p> },
        );
    let text = kept_or(&form.kept, "text", "");
    form.may_note.then(|| {
        view! {
            <form method="post" action=AddNote::url() class="stack action" data-testid="note-form">
                {refusal}
                <input type="hidden" name="csrf" value=form.csrf.clone() />
                <input type="hidden" name="on" value=on />
                <input type="hidden" name="id" value=id.clone() />
                <label>"Note for the next person (it changes nothing; the audit log keeps it)"
                    <textarea name="text" required rows="2">{text.clone()}</textarea>
                </label>
                <button type="submit">"Add note"</button>
            </form>
        }
    })
}

/// Notes, oldest first, with their authors and times.
#[component]
pub fn NoteList(notes: Vec<NoteLine>) -> impl IntoView {
    (!notes.is_empty()).then(|| {
        view! {
            <ul class="notes" data-testid="notes">
                {notes
                    .into_iter()
                    .map(|n| view! {
                        <li>
                            <span class="small muted">{format!("{} · {} · on {}", n.at, n.author, n.about)}</span>
                            <br />
                            {n.text}
                        </li>
                    })
                    .collect_view()}
            </ul>
        }
    })
}
