//! A signed-in console session over loopback, as the console bench drives it.

use std::time::Instant;

use anyhow::Context;
use sqlx::PgPool;

/// A session on the console, as a browser holds one.
pub(super) struct Session {
    client: reqwest::Client,
    base: String,
    cookie: String,
    /// A viewer's API token, for the `/api/` paths.
    token: String,
}

impl Session {
    /// Signs in as a new approver, through the sign-in form as a browser would (an approver's
    /// step page draws every action form the contract permits, the heaviest it gets).
    pub(super) async fn sign_in(base: &str, pool: &PgPool) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let name = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let password = engine::operators::add(pool, &name, engine::domain::Role::Approver).await?;
        let page = client.get(format!("{base}/sign-in")).send().await?;
        // Anonymous visitors get no session (their form token is stateless); sign-in sets one.
        let anonymous = cookie_of(&page);
        let html = page.text().await?;
        let action = between(&html, r#"action="/fn/sign_in"#, "\"").context("no sign-in form")?;
        let csrf = between(&html, r#"name="csrf" value=""#, "\"").context("no csrf token")?;
        let mut post = client
            .post(format!("{base}/fn/sign_in{action}"))
            .header("accept", "application/json");
        if let Some(cookie) = &anonymous {
            post = post.header("cookie", cookie);
        }
        let answer = post
            .form(&[
                ("username", name.as_str()),
                ("password", password.as_str()),
                ("csrf", csrf.as_str()),
            ])
            .send()
            .await?;
        let cookie = cookie_of(&answer)
            .or(anonymous)
            .context("signing in set no session cookie")?;
        anyhow::ensure!(
            answer.status().is_success() || answer.status().is_redirection(),
            "sign-in answered {}",
            answer.status()
        );
        let token = engine::store::token::create(
            pool,
            &engine::store::token::NewToken {
                name: &name,
                role: engine::domain::Role::Viewer,
                creation_key_prefix: None,
                may_configure: false,
                adapters: None,
                on_behalf_of: None,
            },
            engine::store::journal::Actor::Engine("bench"),
        )
        .await?;
        Ok(Self {
            client,
            base: base.to_owned(),
            cookie,
            token,
        })
    }

    /// The session cookie, as `name=value`.
    pub(super) fn cookie(&self) -> &str {
        &self.cookie
    }

    /// Milliseconds to the last byte of `path`, checked to answer 200; an `/api/` path is
    /// asked with the token, any other with the session.
    pub(super) async fn time(&self, path: &str) -> anyhow::Result<f64> {
        let started = Instant::now();
        let request = self.client.get(format!("{}{path}", self.base));
        let request = if path.starts_with("/api/") {
            request.bearer_auth(&self.token)
        } else {
            request.header("cookie", &self.cookie)
        };
        let answer = request.send().await?;
        let status = answer.status();
        let _ = answer.bytes().await?;
        anyhow::ensure!(status.is_success(), "{path} answered {status}");
        Ok(started.elapsed().as_secs_f64() * 1000.0)
    }
}

/// The `name=value` of the session cookie an answer sets.
fn cookie_of(answer: &reqwest::Response) -> Option<String> {
    answer
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
}

/// The text between the first `start` and the next `end` after it.
fn between(text: &str, start: &str, end: &str) -> Option<String> {
    let at = text.find(start)? + start.len();
    let rest = &text[at..];
    Some(rest[..rest.find(end)?].to_owned())
}
