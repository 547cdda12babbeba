use leptos::prelude::*;

use super::types::{BulkPreview, RunView};
use crate::error::ConsoleError;

/// The most rows one run may act on.
pub const MAX_ROWS: i64 = engine::domain::actions::BULK_MAX_ROWS as i64;

#[cfg(feature = "ssr")]
fn action_named(name: &str) -> Result<engine::domain::OperatorAction, ConsoleError> {
    engine::domain::actions::BULK_ACTIONS
        .into_iter()
        .find(|a| a.name() == name)
        .ok_or_else(|| {
            ConsoleError::Invalid {
                reason: "Choose an action that runs in bulk: check destination, retry with the same key, waive or cancel.".into(),
            }
            .answered()
        })
}

/// The rows the filter selects now, each judged for `action` under the signed-in role.
#[server(prefix = "/fn")]
pub async fn preview_bulk(
    state: Option<String>,
    adapter: Option<String>,
    definition: Option<String>,
    older_than: Option<String>,
    action: String,
) -> Result<BulkPreview, ConsoleError> {
    use super::types::PreviewItem;
    use crate::auth::api::session;

    let operator = session::require(engine::domain::Role::Operator).await?;
    let csrf = session::csrf_token(&session::current().await?).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let action = action_named(&action)?;
    let filter = crate::review::api::queue_filter(&state, &adapter, &definition, &older_than)?;
    let kept = {
        use leptos::server_fn::ServerFn;
        session::take_form(StartBulk::PATH).await?
    };
    let (rows, more) =
        engine::recovery::bulk::preview(&pool, &filter, action, operator.role, MAX_ROWS).await?;
    Ok(BulkPreview {
        action,
        rows: rows
            .into_iter()
            .map(|r| PreviewItem {
                step_id: r.step_id.to_string(),
                creation_key: r.creation_key,
                state: r.state,
                adapter: r.adapter.unwrap_or_default(),
                version: r.version,
                refusal: r.refusal,
            })
            .collect(),
        more,
        csrf,
        kept,
    })
}

/// Starts a run over exactly `rows` ("step:version" pairs, comma-separated, as the preview
/// showed them) and opens its progress page.
#[server(prefix = "/fn")]
pub async fn start_bulk(
    action: String,
    rows: String,
    reason: String,
    residual_uncertainty: Option<String>,
    rate: String,
    csrf: String,
) -> Result<String, ConsoleError> {
    use crate::auth::api::session;

    let operator = session::require(engine::domain::Role::Operator).await?;
    session::check_csrf(&session::current().await?, &csrf).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let action = action_named(&action)?;
    let malformed = || {
        ConsoleError::Invalid {
            reason: "The rows of this form are malformed; preview again.".into(),
        }
        .answered()
    };
    let rows = rows
        .split(',')
        .filter(|r| !r.is_empty())
        .map(|pair| {
            let (step, version) = pair.split_once(':')?;
            Some((
                uuid::Uuid::parse_str(step).ok()?,
                version.parse::<i64>().ok()?,
            ))
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(malformed)?;
    if rows.len() > MAX_ROWS as usize {
        return Err(malformed());
    }
    let rate = rate.trim().parse::<i32>().map_err(|_| {
        ConsoleError::Invalid {
            reason: "The rate is a whole number of steps per second.".into(),
        }
        .answered()
    })?;
    let id = engine::recovery::bulk::create(
        &pool,
        &engine::recovery::bulk::NewRun {
            operator: &operator,
            action,
            reason: &reason,
            residual_uncertainty: residual_uncertainty.as_deref(),
            rate_per_sec: rate,
            rows: &rows,
        },
    )
    .await
    .map_err(|e| match e {
        engine::recovery::bulk::BulkError::Invalid(reason) => {
            ConsoleError::Invalid { reason }.answered()
        }
        engine::recovery::bulk::BulkError::Sqlx(e) => e.into(),
    })?;
    engine::recovery::bulk::spawn(pool.clone(), id);
    leptos_axum::redirect(&format!("/bulk/{id}"));
    Ok(id.to_string())
}

/// Run `id` and every item's outcome so far.
#[server(prefix = "/fn")]
pub async fn bulk_run(id: String) -> Result<RunView, ConsoleError> {
    use crate::auth::api::session;

    let operator = session::require(engine::domain::Role::Viewer).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let id = uuid::Uuid::parse_str(&id).map_err(|_| ConsoleError::NotFound.answered())?;
    let p = engine::recovery::bulk::progress(&pool, id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound.answered())?;
    let may_stop = p.finished_at.is_none()
        && operator.role >= engine::domain::Role::Operator
        && (p.author == operator.username || operator.role >= engine::domain::Role::Approver);
    let stop_csrf = match may_stop {
        true => Some(session::csrf_token(&session::current().await?).await?),
        false => None,
    };
    Ok(RunView {
        stopped: p
            .stopped
            .map(|(by, reason)| format!("Stopped by {by}: {reason}")),
        stop_csrf,
        action: p.action.label().to_owned(),
        author: p.author,
        reason: p.reason,
        rate_per_sec: p.rate_per_sec,
        finished: p.finished_at.is_some(),
        items: p
            .items
            .into_iter()
            .map(|(step, key, outcome, message)| {
                (
                    step.to_string(),
                    key,
                    outcome.map_or_else(|| "pending".into(), |o| o.as_str().into()),
                    message.unwrap_or_default(),
                )
            })
            .collect(),
    })
}

/// Stops run `id` (its author or an approver): the rows it has not acted on are refused, and
/// the stop is audited; then its page again.
#[server(prefix = "/fn")]
pub async fn stop_bulk(id: String, reason: String, csrf: String) -> Result<(), ConsoleError> {
    use crate::auth::api::session;

    let operator = session::require(engine::domain::Role::Operator).await?;
    session::check_csrf(&session::current().await?, &csrf).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let run = uuid::Uuid::parse_str(&id).map_err(|_| ConsoleError::NotFound.answered())?;
    match engine::recovery::bulk::stop(&pool, run, &operator, &reason).await {
        Ok(_) => {}
        Err(engine::recovery::bulk::BulkError::Invalid(reason)) => {
            return Err(ConsoleError::Invalid { reason }.answered());
        }
        Err(engine::recovery::bulk::BulkError::Sqlx(e)) => return Err(e.into()),
    }
    leptos_axum::redirect(&format!("/bulk/{run}"));
    Ok(())
}
