use leptos::prelude::*;

use super::types::CurrentOperator;
use crate::error::ConsoleError;

#[cfg(feature = "ssr")]
pub use session::Standing;

#[cfg(feature = "ssr")]
pub(crate) mod session {
    //! The session's contents: who is signed in, since when, and the CSRF token forms must echo.
    //! A visitor who has not signed in has no session row: their sign-in form carries a
    //! stateless token (`engine::operators::form_token`) instead.

    use engine::operators::{Operator, form_token};
    use tower_sessions::Session;

    use crate::error::ConsoleError;
    use crate::forms::KeptForm;

    const OPERATOR: &str = "operator";
    const CSRF: &str = "csrf";
    /// When the session signed in (Unix seconds); tests write an old one to age a session.
    pub const SIGNED_IN_AT: &str = "signed_in_at";
    /// How long a session lasts from sign-in, however active (the idle expiry is shorter).
    pub const SESSION_LIFETIME_HOURS: i64 = 12;
    /// When a request last renewed the session's idle expiry (Unix seconds).
    const SEEN_AT: &str = "seen_at";
    /// A request renews the idle expiry when the last renewal is at least this old: a page view
    /// writes the session at most once in this long (docs/DESIGN.md §15, "Sessions").
    const SEEN_EVERY_SECS: i64 = 5 * 60;

    fn internal(error: impl std::fmt::Display) -> ConsoleError {
        tracing::error!(%error, "session store error");
        ConsoleError::Internal
    }

    fn expired() -> ConsoleError {
        ConsoleError::Conflict {
            reason: "This form has expired or did not come from this console; reload the page and try again.".into(),
        }
        .answered()
    }

    fn pool() -> Result<sqlx::PgPool, ConsoleError> {
        leptos::prelude::use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)
    }

    /// The request's session.
    pub async fn current() -> Result<Session, ConsoleError> {
        leptos_axum::extract::<Session>().await.map_err(internal)
    }

    /// Who a request is from, read once however many of its page's parts ask: the server
    /// provides an empty one to each request.
    #[derive(Clone, Default)]
    pub struct Standing(std::sync::Arc<tokio::sync::OnceCell<Option<Operator>>>);

    /// The signed-in operator with the role their account has now, if any. Each request
    /// re-reads the account by id, once ([`Standing`]): a disabled or removed account, one whose
    /// password was reset since this sign-in, or a session older than
    /// [`SESSION_LIFETIME_HOURS`], is signed out here (its session deleted).
    pub async fn operator(session: &Session) -> Result<Option<Operator>, ConsoleError> {
        match leptos::prelude::use_context::<Standing>() {
            Some(Standing(once)) => once
                .get_or_try_init(|| read_operator(session))
                .await
                .cloned(),
            None => read_operator(session).await,
        }
    }

    async fn read_operator(session: &Session) -> Result<Option<Operator>, ConsoleError> {
        let Some(mut who) = session.get::<Operator>(OPERATOR).await.map_err(internal)? else {
            return Ok(None);
        };
        let now = chrono::Utc::now().timestamp();
        let signed_in_at = session.get::<i64>(SIGNED_IN_AT).await.map_err(internal)?;
        let fresh =
            signed_in_at.is_some_and(|at| at <= now && now - at < SESSION_LIFETIME_HOURS * 60 * 60);
        let signed_in = signed_in_at
            .filter(|_| fresh)
            .and_then(|at| chrono::DateTime::from_timestamp(at, 0));
        let role = match signed_in {
            Some(at) => engine::operators::standing(&pool()?, who.id, at).await?,
            None => None,
        };
        match role {
            Some(role) => {
                who.role = role;
                let seen_at = session.get::<i64>(SEEN_AT).await.map_err(internal)?;
                if seen_at.is_none_or(|at| now - at >= SEEN_EVERY_SECS) {
                    session.insert(SEEN_AT, now).await.map_err(internal)?;
                }
                Ok(Some(who))
            }
            None => {
                session.flush().await.map_err(internal)?;
                Ok(None)
            }
        }
    }

    /// Whether `session` holds a sign-in. Not checked against the account here: the next page
    /// does that, and signs a stale session out.
    pub async fn signed_in(session: &Session) -> Result<bool, ConsoleError> {
        let who = session
            .get::<serde_json::Value>(OPERATOR)
            .await
            .map_err(internal)?;
        Ok(who.is_some())
    }

    /// Signs `operator` in under a new session id (no fixation) and a new CSRF token.
    pub async fn sign_in(session: &Session, operator: &Operator) -> Result<(), ConsoleError> {
        session.cycle_id().await.map_err(internal)?;
        session.insert(OPERATOR, operator).await.map_err(internal)?;
        let now = chrono::Utc::now().timestamp();
        session.insert(SIGNED_IN_AT, now).await.map_err(internal)?;
        session.insert(SEEN_AT, now).await.map_err(internal)?;
        // A new token for the new sign-in, made here rather than on first use: a page's parts
        // ask for it at once, and each would make its own (docs/DESIGN.md §15, "Sessions").
        session
            .insert(CSRF, new_csrf_token())
            .await
            .map_err(internal)?;
        Ok(())
    }

    fn new_csrf_token() -> String {
        format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        )
    }

    /// The session's CSRF token, made at sign-in (or on first use by a session signed in
    /// before tokens were made there).
    pub async fn csrf_token(session: &Session) -> Result<String, ConsoleError> {
        if let Some(token) = session.get::<String>(CSRF).await.map_err(internal)? {
            return Ok(token);
        }
        let token = new_csrf_token();
        session.insert(CSRF, &token).await.map_err(internal)?;
        Ok(token)
    }

    /// The token for the header's and the sign-in page's forms: the session's once signed in,
    /// a stateless one (stored nowhere) before.
    pub async fn form_token(session: &Session) -> Result<String, ConsoleError> {
        if operator(session).await?.is_some() {
            return csrf_token(session).await;
        }
        Ok(form_token::issue(&pool()?).await?)
    }

    const KEPT: &str = "kept_form";

    /// Keeps `form` for the next page this session renders, when someone is signed in;
    /// answers whether it did (a visitor's session is never written).
    pub async fn keep_form(session: &Session, form: &KeptForm) -> Result<bool, ConsoleError> {
        if !signed_in(session).await? {
            return Ok(false);
        }
        session.insert(KEPT, form).await.map_err(internal)?;
        Ok(true)
    }

    /// The form this session kept for the server function at `path`, once; a form kept for
    /// another server function stays for its own page.
    pub async fn take_form(path: &str) -> Result<Option<KeptForm>, ConsoleError> {
        let session = current().await?;
        match session.get::<KeptForm>(KEPT).await.map_err(internal)? {
            Some(form) if form.path == path => {
                session.remove::<KeptForm>(KEPT).await.map_err(internal)?;
                Ok(Some(form))
            }
            _ => Ok(None),
        }
    }

    const NOTICE: &str = "notice";

    /// Keeps what an action did for the next page this session renders (after its redirect).
    pub async fn set_notice(session: &Session, notice: &str) -> Result<(), ConsoleError> {
        session.insert(NOTICE, notice).await.map_err(internal)
    }

    /// What the last action did, once. Removed only when there is one: a removal marks the
    /// session changed, and a changed session is written back when the page is answered, which
    /// every view of a page with a notice slot would otherwise do (docs/DESIGN.md §15).
    pub async fn take_notice(session: &Session) -> Result<Option<String>, ConsoleError> {
        if session
            .get::<String>(NOTICE)
            .await
            .map_err(internal)?
            .is_none()
        {
            return Ok(None);
        }
        session.remove::<String>(NOTICE).await.map_err(internal)
    }

    /// The signed-in operator, if their current role is at least `role`; a refusal otherwise.
    pub async fn require(role: engine::domain::Role) -> Result<Operator, ConsoleError> {
        let session = current().await?;
        match operator(&session).await? {
            None => Err(ConsoleError::SignIn {
                reason: "Sign in to use the console.".into(),
            }
            .answered()),
            Some(who) if who.role < role => Err(ConsoleError::Forbidden {
                reason: format!(
                    "This needs the {} role or higher; you are signed in as {}.",
                    role.as_str(),
                    who.role.as_str()
                ),
            }
            .answered()),
            Some(who) => Ok(who),
        }
    }

    /// What every state-changing console form starts with: the signed-in operator (the action
    /// itself decides what their role may do), their session, once the form carried its
    /// token, and the database.
    pub async fn acting(csrf: &str) -> Result<(Operator, Session, sqlx::PgPool), ConsoleError> {
        let operator = require(engine::domain::Role::Viewer).await?;
        let current = current().await?;
        check_csrf(&current, csrf).await?;
        let pool = leptos::prelude::use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
        Ok((operator, current, pool))
    }

    /// Refuses a state-changing request whose form did not carry this session's token
    /// (compared in constant time).
    pub async fn check_csrf(session: &Session, sent: &str) -> Result<(), ConsoleError> {
        if carries_session_token(session, sent).await? {
            return Ok(());
        }
        Err(expired())
    }

    async fn carries_session_token(session: &Session, sent: &str) -> Result<bool, ConsoleError> {
        let token = session.get::<String>(CSRF).await.map_err(internal)?;
        Ok(token.is_some_and(|token| form_token::same(token.as_bytes(), sent.as_bytes())))
    }

    /// Refuses a sign-in whose form carried neither this session's token nor a fresh stateless
    /// one, or that a browser says came from another site (a stateless token is not bound to
    /// the browser, so a cross-site post could otherwise sign a victim in as the attacker).
    pub async fn check_sign_in_csrf(session: &Session, sent: &str) -> Result<(), ConsoleError> {
        let headers = leptos_axum::extract::<http::HeaderMap>()
            .await
            .map_err(internal)?;
        let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
        if matches!(site, Some("cross-site" | "same-site")) {
            return Err(expired());
        }
        if carries_session_token(session, sent).await? || form_token::verify(&pool()?, sent).await?
        {
            return Ok(());
        }
        Err(expired())
    }

    /// The client's IP address, or `unknown` when the server was not told it (a router driven
    /// without connection info, as tests drive it).
    pub async fn client_address() -> String {
        // app has no direct axum dependency; this is axum's own ConnectInfo.
        use leptos::server_fn::axum_export::extract::ConnectInfo;
        leptos_axum::extract::<ConnectInfo<std::net::SocketAddr>>()
            .await
            .map_or_else(
                |_| engine::operators::UNKNOWN_ADDRESS.to_owned(),
                |ConnectInfo(address)| address.ip().to_string(),
            )
    }
}

/// Keeps a refused form for the page it returns to, when `session` is signed in; answers
/// whether it did (`server::http::kept_forms` calls it; docs/DESIGN.md §18).
#[cfg(feature = "ssr")]
pub async fn keep_refused_form(
    session: &tower_sessions::Session,
    form: &crate::forms::KeptForm,
) -> Result<bool, ConsoleError> {
    session::keep_form(session, form).await
}

/// Who is signed in.
#[server(prefix = "/fn")]
pub async fn who_is_signed_in() -> Result<Option<CurrentOperator>, ConsoleError> {
    use leptos::server_fn::ServerFn;
    let session = session::current().await?;
    let Some(who) = session::operator(&session).await? else {
        return Ok(None);
    };
    let refused = session::take_form(SignOut::PATH).await?;
    Ok(Some(CurrentOperator {
        username: who.username,
        role: who.role,
        refusal: refused.and_then(|kept| kept.sentence()),
    }))
}

/// The token the header's and the sign-in page's forms carry.
#[server(prefix = "/fn")]
pub async fn csrf_token() -> Result<String, ConsoleError> {
    session::form_token(&session::current().await?).await
}

/// Signs in with a username and password (throttled: see `engine::operators::sign_in`), then
/// goes to the console.
#[server(prefix = "/fn")]
pub async fn sign_in(username: String, password: String, csrf: String) -> Result<(), ConsoleError> {
    use engine::operators::SignIn;

    let session = session::current().await?;
    session::check_sign_in_csrf(&session, &csrf).await?;
    let engine::db::AnonymousPool(pool) =
        use_context::<engine::db::AnonymousPool>().ok_or(ConsoleError::Internal)?;
    let address = session::client_address().await;
    let outcome = engine::operators::sign_in(&pool, &username, &password, &address).await?;
    let reason = outcome.refusal().unwrap_or_default();
    match outcome {
        SignIn::SignedIn(operator) => {
            session::sign_in(&session, &operator).await?;
            leptos_axum::redirect("/");
            Ok(())
        }
        SignIn::Refused => Err(ConsoleError::SignIn { reason }.answered()),
        SignIn::Throttled { seconds, .. } => {
            if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
                response.insert_header(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
            }
            Err(ConsoleError::Throttled { reason }.answered())
        }
    }
}

/// Ends the session.
#[server(prefix = "/fn")]
pub async fn sign_out(csrf: String) -> Result<(), ConsoleError> {
    let session = session::current().await?;
    session::check_csrf(&session, &csrf).await?;
    session.flush().await.map_err(|error| {
        tracing::error!(%error, "session store error");
        ConsoleError::Internal
    })?;
    leptos_axum::redirect("/sign-in");
    Ok(())
}
