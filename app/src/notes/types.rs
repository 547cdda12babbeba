use serde::{Deserialize, Serialize};

use crate::forms::KeptForm;

/// One note as a page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteLine {
    pub at: String,
    pub author: String,
    pub text: String,
    /// What it is about, in words: "the workflow", "step deliver", "the incident".
    pub about: String,
}

/// What a page's note form needs: whether the signed-in person may write one (an operator or
/// an approver), the session's CSRF token, and the note this session last posted here and the
/// server refused, as typed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteForm {
    pub may_note: bool,
    pub csrf: String,
    pub kept: Option<KeptForm>,
}
