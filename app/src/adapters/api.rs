use leptos::prelude::*;

use super::types::AdaptersView;
use crate::error::ConsoleError;

/// Every registered adapter, with its claims' trust and its hold; for a signed-in viewer.
#[server(prefix = "/fn")]
pub async fn adapters() -> Result<AdaptersView, ConsoleError> {
    use crate::auth::api::session;
    use engine::domain::Role;

    let operator = session::require(Role::Viewer).await?;
    let current = session::current().await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let kept = {
        use leptos::server_fn::ServerFn;
        let mut kept = None;
        for path in [HoldAdapter::PATH, ResumeAdapter::PATH, LimitAdapter::PATH] {
            if kept.is_none() {
                kept = session::take_form(path).await?;
            }
        }
        kept
    };
    let (listed, waiting) = tokio::try_join!(
        engine::adapter::apply::listed(&pool),
        engine::store::held::counts(&pool),
    )?;
    let rows = listed
        .into_iter()
        .map(|listed| {
            let held_steps = waiting
                .iter()
                .find_map(|(name, n)| (*name == listed.adapter.name).then_some(*n))
                .unwrap_or(0);
            adapter_row(listed, held_steps)
        })
        .collect();
    Ok(AdaptersView {
        adapters: rows,
        may_hold: operator.role >= Role::Approver,
        csrf: session::csrf_token(&current).await?,
        notice: session::take_notice(&current).await?,
        kept,
    })
}

/// One adapter as the page shows it.
#[cfg(feature = "ssr")]
fn adapter_row(
    listed: engine::adapter::apply::Listed,
    held_steps: i64,
) -> super::types::AdapterRow {
    let engine::adapter::apply::Listed {
        adapter: a,
        claims,
        hold,
        limits,
        limit_override,
    } = listed;
    let hold = hold.as_ref();
    super::types::AdapterRow {
        kind: a.contract.kind().as_str().to_owned(),
        capabilities: a.contract.capabilities_summary(),
        verified: a.may_send(),
        claims: claims
            .iter()
            .map(|c| (c.claim.label(), c.trust.label().to_owned()))
            .collect(),
        tripped_by: hold
            .and_then(|h| h.tripped_by.as_ref())
            .and_then(|t| t.as_array())
            .map(|rows| rows.iter().map(trouble_line).collect())
            .unwrap_or_default(),
        breaker: a
            .source
            .as_deref()
            .and_then(|s| engine::adapter::AdapterSpec::parse(s).ok())
            .and_then(|spec| spec.breaker)
            .map(|b| {
                format!(
                    "Breaker: holds itself after {} attempts end outcome unknown or with a 5xx answer within {}s.",
                    b.trips_after,
                    b.within.0.as_secs()
                )
            }),
        held: hold.map(|h| {
            let since = h.held_at.format("%Y-%m-%d %H:%M UTC");
            let lookups = if h.holds_lookups {
                ""
            } else {
                " (lookups still go)"
            };
            format!("Held by {} since {since}{lookups}: {}", h.held_by, h.reason)
        }),
        limits: limits.map(|l| limits_line(&l, limit_override.as_ref())),
        limit_shown: limit_override.as_ref().map_or_else(|| super::types::NO_OVERRIDE.to_owned(), |o| {
            o.set_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        }),
        held_steps,
        name: a.name,
    }
}

/// An adapter's limits in force, and whose they are.
#[cfg(feature = "ssr")]
fn limits_line(
    limits: &engine::domain::Limits,
    over: Option<&engine::store::pace::LimitOverride>,
) -> String {
    match over {
        Some(o) => format!(
            "Limited to {limits}: overridden by {} since {}: {}",
            o.set_by,
            o.set_at.format("%Y-%m-%d %H:%M UTC"),
            o.reason
        ),
        None => format!("Limited to {limits}, as its file declares."),
    }
}

/// One attempt that tripped a breaker, as the page lists it: when, what was seen, the step.
#[cfg(feature = "ssr")]
fn trouble_line(row: &serde_json::Value) -> (String, String, String) {
    let text = |key: &str| {
        row.get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let seen = match (text("observed"), text("status")) {
        (observed, status) if status.is_empty() => observed.replace('_', " "),
        (observed, status) => format!("{} ({status})", observed.replace('_', " ")),
    };
    (text("observed_at"), seen, text("step"))
}

/// Holds adapter `adapter` (approver): no worker sends it a new request, nor a lookup unless
/// `lookups` is "go", until it is resumed.
#[server(prefix = "/fn")]
pub async fn hold_adapter(
    adapter: String,
    reason: String,
    lookups: Option<String>,
    csrf: String,
) -> Result<String, ConsoleError> {
    use crate::auth::api::session;

    let (operator, current, pool) = session::acting(&csrf).await?;
    let holds_lookups = lookups.as_deref() != Some("go");
    let by = (operator.actor(), operator.role);
    let held = engine::recovery::hold::hold_adapter(&pool, by, &adapter, &reason, holds_lookups)
        .await
        .map_err(|e| ConsoleError::from(e).answered())?;
    let message = format!(
        "Held: no new request leaves for {} until it is resumed.",
        held.adapter
    );
    session::set_notice(&current, &message).await?;
    leptos_axum::redirect("/adapters");
    Ok(message)
}

/// Resumes adapter `adapter` (approver): its held steps go back to the queue, oldest first, all
/// at once or `per_second` a second.
#[server(prefix = "/fn")]
pub async fn resume_adapter(
    adapter: String,
    reason: String,
    per_second: Option<String>,
    csrf: String,
) -> Result<String, ConsoleError> {
    use crate::auth::api::session;

    let (operator, current, pool) = session::acting(&csrf).await?;
    let per_second = match per_second.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(text) => Some(text.parse::<f64>().map_err(|_| {
            ConsoleError::Invalid {
                reason: format!("The ramp is a number of steps a second, not `{text}`."),
            }
            .answered()
        })?),
    };
    let by = (operator.actor(), operator.role);
    let done = engine::recovery::hold::resume_adapter(&pool, by, &adapter, &reason, per_second)
        .await
        .map_err(|e| ConsoleError::from(e).answered())?;
    let message = format!(
        "Resumed {}: {} held steps went back to the queue.",
        done.hold.adapter, done.released
    );
    session::set_notice(&current, &message).await?;
    leptos_axum::redirect("/adapters");
    Ok(message)
}

/// Overrides adapter `adapter`'s limits (approver): each value given replaces its file's for
/// every worker process; `clear` ends the override.
#[server(prefix = "/fn")]
pub async fn limit_adapter(
    adapter: String,
    reason: String,
    per_second: Option<String>,
    in_flight: Option<String>,
    clear: Option<String>,
    shown: Option<String>,
    csrf: String,
) -> Result<String, ConsoleError> {
    use crate::auth::api::session;

    let (operator, current, pool) = session::acting(&csrf).await?;
    let number = |text: Option<&str>, what: &str| match text.map(str::trim) {
        None | Some("") => Ok(None),
        Some(text) => text.parse::<f64>().map(Some).map_err(|_| {
            ConsoleError::Invalid {
                reason: format!("{what} is a number, not `{text}`."),
            }
            .answered()
        }),
    };
    let limits = if clear.is_some() {
        engine::domain::Limits::default()
    } else {
        engine::domain::Limits {
            requests_per_second: number(per_second.as_deref(), "Requests a second")?,
            in_flight: number(in_flight.as_deref(), "Calls in flight")?.map(|n| {
                if n.fract() == 0.0 && n >= 0.0 {
                    n as u32
                } else {
                    0
                }
            }),
        }
    };
    if clear.is_none() && limits.is_unlimited() {
        return Err(ConsoleError::Invalid {
            reason: "Name a limit (requests a second, calls in flight), or clear the override."
                .into(),
        }
        .answered());
    }
    let by = (operator.actor(), operator.role);
    // The override the page showed (when it was set, or `none`); a post without it is not
    // checked for staleness.
    let shown = shown.map(|at| match at.trim() {
        super::types::NO_OVERRIDE => Ok(engine::recovery::limit::Shown(None)),
        at => chrono::DateTime::parse_from_rfc3339(at)
            .map(|t| engine::recovery::limit::Shown(Some(t.to_utc())))
            .map_err(|_| {
                ConsoleError::Invalid {
                    reason: "The form's `shown` field is not a time; reload the page.".into(),
                }
                .answered()
            }),
    });
    let shown = shown.transpose()?;
    let now = engine::recovery::limit::limit_adapter(&pool, by, &adapter, limits, &reason, shown)
        .await
        .map_err(|e| ConsoleError::from(e).answered())?;
    let message = match now {
        Some(o) => format!(
            "{adapter} is limited to {} across every worker process.",
            o.limits
        ),
        None => format!("{adapter}'s override is cleared: its file's limits apply again."),
    };
    session::set_notice(&current, &message).await?;
    leptos_axum::redirect("/adapters");
    Ok(message)
}
