//! Refused forms, kept. Every form of the console posts without JavaScript; when the server
//! refuses such a post, Leptos redirects back to the page the form was on. The server's
//! `kept_forms` layer then keeps what was typed (never the password or the CSRF token) and why
//! it was refused, so that page draws the form again with the operator's words and the
//! refusal's sentence. A signed-in operator's kept form waits in the session for the next page
//! (shown once; `auth::api::session::take_form`); a visitor's sign-in keeps only the username,
//! in the page's address, so an anonymous visit still stores nothing (docs/DESIGN.md §18).

use serde::{Deserialize, Serialize};

use crate::error::ConsoleError;

/// Fields a kept form never holds: the secret, and the token (the next page draws its own).
pub const NOT_KEPT: [&str; 2] = ["password", "csrf"];

/// What the operator had typed into a form the server refused, and why it refused it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptForm {
    /// The server function the form posted to (its `ServerFn::PATH`).
    pub path: String,
    /// The refusal, as the server function answered it.
    pub refusal: Option<ConsoleError>,
    /// The fields as posted, in order, without those in [`NOT_KEPT`].
    pub fields: Vec<(String, String)>,
}

impl KeptForm {
    /// The value posted for `name`, if the form carried it.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find_map(|(n, v)| (n == name).then_some(v.as_str()))
    }

    /// The value posted for `name`, or nothing.
    pub fn value(&self, name: &str) -> String {
        self.field(name).unwrap_or_default().to_owned()
    }

    /// The refusal as the page prints it.
    pub fn sentence(&self) -> Option<String> {
        self.refusal.as_ref().map(ToString::to_string)
    }
}

/// The value `kept` holds for `name`, or `default` when nothing was kept.
pub fn kept_or(kept: &Option<KeptForm>, name: &str, default: &str) -> String {
    kept.as_ref()
        .and_then(|k| k.field(name))
        .unwrap_or(default)
        .to_owned()
}

/// The refusal Leptos put in this page's address for the server function at `path` (how a
/// visitor's refused sign-in comes back), if any.
pub fn refusal_in_address(path: &str) -> Option<ConsoleError> {
    use leptos::prelude::ReadUntracked;
    use leptos::server_fn::error::ServerFnUrlError;
    let query = leptos_router::hooks::use_query_map();
    let query = query.read_untracked();
    let err = query
        .get("__err")
        .filter(|_| query.get("__path").as_deref() == Some(path))?;
    Some(ServerFnUrlError::<ConsoleError>::decode_err(&err))
}
