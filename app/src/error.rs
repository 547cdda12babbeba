//! The one error type server functions return to the browser.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

/// What the console tells a person when an action or a page cannot be served.
///
/// Database and driver errors never reach the browser as text: they are logged on the server
/// and arrive as [`ConsoleError::Internal`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ConsoleError {
    /// The thing asked for does not exist.
    #[error("not found")]
    NotFound,
    /// Nobody is signed in, or the username and password did not match.
    #[error("{reason}")]
    SignIn { reason: String },
    /// The signed-in person's role does not allow this; `reason` names the role it needs.
    #[error("{reason}")]
    Forbidden { reason: String },
    /// Too many failed attempts (sign-in throttling): wait, then try again.
    #[error("{reason}")]
    Throttled { reason: String },
    /// Someone else changed the thing first, or the page was stale.
    #[error("{reason}")]
    Conflict { reason: String },
    /// The role, or the adapter's contract in the step's current state, does not permit this.
    #[error("{why}")]
    NotPermitted { why: String },
    /// A field of the form is missing or malformed.
    #[error("{reason}")]
    Invalid { reason: String },
    /// Something failed on the server; the details are in its log.
    #[error("something went wrong on the server; the details are in its log")]
    Internal,
    /// The request never reached the server function (network, encoding).
    #[error("the request could not be completed: {0}")]
    Transport(String),
}

impl FromServerFnError for ConsoleError {
    type Encoder = JsonEncoding;

    /// Arguments the server cannot read (a missing, repeated or malformed form field, or a
    /// body that is not UTF-8, which the framework names "deserializing results" on both sides)
    /// are the sender's mistake: on the server they answer 422 with a sentence, never the
    /// parser's text. Everything else, and everything in the browser, is a transport failure.
    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        let unreadable_request = cfg!(feature = "ssr")
            && matches!(
                value,
                ServerFnErrorErr::Args(_)
                    | ServerFnErrorErr::MissingArg(_)
                    | ServerFnErrorErr::Deserialization(_)
            );
        if !unreadable_request {
            return ConsoleError::Transport(value.to_string());
        }
        let refusal = ConsoleError::Invalid {
            reason: "This form is missing a field or carries one the console cannot read; \
                     reload the page and try again."
                .into(),
        };
        #[cfg(feature = "ssr")]
        let refusal = refusal.answered();
        refusal
    }
}

#[cfg(feature = "ssr")]
impl ConsoleError {
    /// The HTTP status this refusal answers with.
    pub fn status(&self) -> http::StatusCode {
        match self {
            ConsoleError::NotFound => http::StatusCode::NOT_FOUND,
            ConsoleError::SignIn { .. } => http::StatusCode::UNAUTHORIZED,
            ConsoleError::Forbidden { .. } | ConsoleError::NotPermitted { .. } => {
                http::StatusCode::FORBIDDEN
            }
            ConsoleError::Conflict { .. } => http::StatusCode::CONFLICT,
            ConsoleError::Throttled { .. } => http::StatusCode::TOO_MANY_REQUESTS,
            ConsoleError::Invalid { .. } => http::StatusCode::UNPROCESSABLE_ENTITY,
            ConsoleError::Internal | ConsoleError::Transport(_) => {
                http::StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    /// Sets this refusal's status on the response being built, and returns it.
    pub fn answered(self) -> Self {
        if let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
            response.set_status(self.status());
        }
        self
    }
}

#[cfg(feature = "ssr")]
impl From<sqlx::Error> for ConsoleError {
    fn from(error: sqlx::Error) -> Self {
        tracing::error!(%error, "database error in a server function");
        ConsoleError::Internal
    }
}

#[cfg(feature = "ssr")]
impl From<engine::recovery::ActionError> for ConsoleError {
    fn from(error: engine::recovery::ActionError) -> Self {
        use engine::recovery::ActionError as E;
        match error {
            E::NotFound => ConsoleError::NotFound,
            E::Forbidden(why) | E::NotPermitted(why) => ConsoleError::NotPermitted { why },
            E::Stale(reason) | E::Conflict(reason) => ConsoleError::Conflict { reason },
            E::Invalid(reason) => ConsoleError::Invalid { reason },
            e @ E::Destination => ConsoleError::Conflict {
                reason: e.to_string(),
            },
            E::Sqlx(e) => e.into(),
        }
    }
}
