use leptos::prelude::*;

use super::types::CurrentOperator;
use crate::error::ConsoleError;

#[cfg(feature = "ssr")]
pub(crate) mod session {
    //! The session's contents: who is signed in, and the CSRF token forms must echo.

    use engine::operators::Operator;
    use tower_sessions::Session;

    use crate::error::ConsoleError;

    const OPERATOR: &str = "operator";
    const CSRF: &str = "csrf";

    fn internal(error: impl std::fmt::Display) -> ConsoleError {
        tracing::error!(%error, "session store error");
        ConsoleError::Internal
    }

    /// The request's session.
    pub async fn current() -> Result<Session, ConsoleError> {
        leptos_axum::extract::<Session>().await.map_err(internal)
    }

    /// The signed-in operator, if any.
    pub async fn operator(session: &Session) -> Result<Option<Operator>, ConsoleError> {
        session.get(OPERATOR).await.map_err(internal)
    }

    /// Signs `operator` in under a new session id (no fixation) and a new CSRF token.
    pub async fn sign_in(session: &Session, operator: &Operator) -> Result<(), ConsoleError> {
        session.cycle_id().await.map_err(internal)?;
        session.insert(OPERATOR, operator).await.map_err(internal)?;
        session.remove::<String>(CSRF).await.map_err(internal)?;
        Ok(())
    }

    /// The session's CSRF token, created on first use.
    pub async fn csrf_token(session: &Session) -> Result<String, ConsoleError> {
        if let Some(token) = session.get::<String>(CSRF).await.map_err(internal)? {
            return Ok(token);
        }
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        session.insert(CSRF, &token).await.map_err(internal)?;
        Ok(token)
    }

    const NOTICE: &str = "notice";

    /// Keeps what an action did for the next page this session renders (after its redirect).
    pub async fn set_notice(session: &Session, notice: &str) -> Result<(), ConsoleError> {
        session.insert(NOTICE, notice).await.map_err(internal)
    }

    /// What the last action did, once.
    pub async fn take_notice(session: &Session) -> Result<Option<String>, ConsoleError> {
        session.remove::<String>(NOTICE).await.map_err(internal)
    }

    /// The signed-in operator, if their role is at least `role`; a refusal otherwise.
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

    /// Refuses a state-changing request whose form did not carry this session's token.
    pub async fn check_csrf(session: &Session, sent: &str) -> Result<(), ConsoleError> {
        match session.get::<String>(CSRF).await.map_err(internal)? {
            Some(token) if !sent.is_empty() && token == sent => Ok(()),
            _ => Err(ConsoleError::Conflict {
                reason: "This form has expired or did not come from this console; reload the page and try again.".into(),
            }
            .answered()),
        }
    }
}

/// Who is signed in.
#[server(prefix = "/fn")]
pub async fn who_is_signed_in() -> Result<Option<CurrentOperator>, ConsoleError> {
    let session = session::current().await?;
    Ok(session::operator(&session).await?.map(|o| CurrentOperator {
        username: o.username,
        role: o.role,
    }))
}

/// The token every form of this session carries.
#[server(prefix = "/fn")]
pub async fn csrf_token() -> Result<String, ConsoleError> {
    session::csrf_token(&session::current().await?).await
}

/// Signs in with a username and password, then goes to the console.
#[server(prefix = "/fn")]
pub async fn sign_in(username: String, password: String, csrf: String) -> Result<(), ConsoleError> {
    use engine::store::journal::{self, Actor, AuditEntry};

    let session = session::current().await?;
    session::check_csrf(&session, &csrf).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let Some(operator) = engine::operators::authenticate(&pool, username.trim(), &password).await?
    else {
        return Err(ConsoleError::SignIn {
            reason: "Unknown username or wrong password.".into(),
        }
        .answered());
    };
    session::sign_in(&session, &operator).await?;
    let mut conn = pool.acquire().await?;
    journal::audit(
        &mut conn,
        &AuditEntry {
            actor: Actor::Operator(&operator.username),
            action: "sign_in",
            workflow: None,
            step: None,
            reason: None,
            details: serde_json::json!({ "role": operator.role }),
        },
    )
    .await?;
    leptos_axum::redirect("/");
    Ok(())
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
