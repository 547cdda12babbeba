use leptos::prelude::*;

use super::types::QueuePage;
use crate::error::ConsoleError;

/// Rows per page of the review queue.
pub const PAGE_SIZE: i64 = 50;

/// The oldest open incidents the queue's first page shows; `/incidents` lists them all.
pub const INCIDENTS_SHOWN: i64 = 10;

/// One page of the review queue, filtered, after the keyset cursor `after` (from a previous
/// page); with `q`, also the workflows it names.
#[server(prefix = "/fn")]
pub async fn review_queue(
    state: Option<String>,
    adapter: Option<String>,
    definition: Option<String>,
    older_than: Option<String>,
    noted: Option<String>,
    q: Option<String>,
    after: Option<String>,
) -> Result<QueuePage, ConsoleError> {
    use super::types::QueueQuery;
    use crate::incidents::list::{OpenIncidents, open_incident_items};
    use chrono::Utc;
    crate::auth::api::session::require(engine::domain::Role::Viewer).await?;
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let query = QueueQuery {
        state,
        adapter,
        definition,
        older_than,
        noted,
        q,
        after,
    };
    let mut filter = queue_filter(
        &query.state,
        &query.adapter,
        &query.definition,
        &query.older_than,
    )?;
    filter.noted_since = noted_since(&query.noted)?;
    let searched = text_filter(&query.q)?;
    let after = query.after.clone();
    let cursor = crate::lists::keyset_cursor(after.as_deref())?;
    let now = Utc::now();
    // The page's reads are independent: one connection each, at once, so the page waits for
    // the slowest of them rather than for their sum.
    let (mut rows, counts, found, incidents, definitions, alerts) = tokio::try_join!(
        async {
            Ok::<_, ConsoleError>(
                engine::read::queue::queue(&pool, &filter, cursor, PAGE_SIZE + 1).await?,
            )
        },
        async { Ok(engine::read::queue::queue_counts(&pool).await?) },
        async {
            match searched {
                None => Ok(None),
                Some(text) => Ok(Some(search_steps(&pool, &text).await?)),
            }
        },
        async {
            match cursor {
                None => open_incident_items(&pool, INCIDENTS_SHOWN, None).await,
                Some(_) => Ok(OpenIncidents::default()),
            }
        },
        async { Ok(definition_names(&pool).await?) },
        async { Ok(engine::read::alerts::open(&pool).await?) },
    )?;
    let next = engine::read::keyset::cut(&mut rows, PAGE_SIZE, |last| {
        (last.unknown_since, last.step_id)
    })
    .map(engine::read::keyset::format);
    Ok(QueuePage {
        items: queue_items(&pool, rows, now).await?,
        incidents,
        next,
        by_state: counts.by_state,
        by_adapter: counts.by_adapter,
        definitions,
        found,
        alerts: alerts.into_iter().map(|a| alert_item(a, now)).collect(),
    })
}

/// An open alert as the queue's banner names it: its rule in words, its subject and its age
/// in seconds.
#[cfg(feature = "ssr")]
fn alert_item(
    a: engine::read::alerts::Alert,
    now: chrono::DateTime<chrono::Utc>,
) -> (String, String, i64) {
    (
        a.rule.replace('_', " "),
        a.subject,
        (now - a.opened_at).num_seconds(),
    )
}

/// The external steps of every workflow `text` names (a workflow id, a creation key, a request
/// key or an external reference), at most a page of them.
#[cfg(feature = "ssr")]
async fn search_steps(
    pool: &sqlx::PgPool,
    text: &str,
) -> Result<Vec<super::types::FoundStep>, ConsoleError> {
    use super::types::FoundStep;
    Ok(engine::read::queue::search(pool, text, PAGE_SIZE)
        .await?
        .into_iter()
        .map(|r| FoundStep {
            step_id: r.step_id.to_string(),
            creation_key: r.creation_key,
            logical: r.logical,
            state: r.state,
            adapter: r.adapter.unwrap_or_default(),
            request_key: r.request_key.unwrap_or_default(),
            external_reference: r.external_reference.unwrap_or_default(),
        })
        .collect())
}

/// The queue rows as the page lists them.
#[cfg(feature = "ssr")]
async fn queue_items(
    pool: &sqlx::PgPool,
    rows: Vec<engine::read::queue::QueueRow>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<super::types::QueueItem>, sqlx::Error> {
    let mut items = Vec::with_capacity(rows.len());
    for row in rows {
        let words = step_words(pool, &row).await?;
        items.push(queue_item(row, &words, now));
    }
    Ok(items)
}

/// The names of the applied definitions, for the queue's filter.
#[cfg(feature = "ssr")]
async fn definition_names(pool: &sqlx::PgPool) -> Result<Vec<String>, sqlx::Error> {
    let mut names: Vec<String> = engine::store::definition::all(pool)
        .await?
        .into_iter()
        .map(|d| d.name)
        .collect();
    names.dedup();
    Ok(names)
}

/// The words the row's definition gives its step (compiled once per process and version).
#[cfg(feature = "ssr")]
async fn step_words(
    pool: &sqlx::PgPool,
    r: &engine::read::queue::QueueRow,
) -> Result<engine::domain::words::StepWords, sqlx::Error> {
    use engine::definition::{Catalog, CatalogError};
    match Catalog::get(pool, &r.definition_name, r.definition_version).await {
        Ok(definition) => Ok(definition.words(&r.logical)),
        Err(CatalogError::Sqlx(e)) => Err(e),
        Err(_) => Ok(engine::domain::words::StepWords::named(&r.logical)),
    }
}

/// One queue row as the page lists it, with the customer's sentence in its definition's words.
#[cfg(feature = "ssr")]
fn queue_item(
    r: engine::read::queue::QueueRow,
    words: &engine::domain::words::StepWords,
    now: chrono::DateTime<chrono::Utc>,
) -> super::types::QueueItem {
    let sentence = {
        use engine::domain::words::{DuplicateStatus, status_sentence};
        let duplicate = if r.open_incident {
            DuplicateStatus::Open
        } else {
            DuplicateStatus::None
        };
        Some(status_sentence(words, r.state, None, duplicate))
    };
    super::types::QueueItem {
        step_id: r.step_id.to_string(),
        workflow_id: r.workflow_id.to_string(),
        creation_key: r.creation_key,
        logical: r.logical,
        state: r.state,
        adapter: r.adapter.unwrap_or_default(),
        capabilities: r.capabilities,
        unknown_age_secs: (now - r.unknown_since).num_seconds(),
        attempts: r.attempts,
        request_key: r.request_key.unwrap_or_default(),
        sentence,
        open_incident: r.open_incident,
        noted: r.noted_at.is_some(),
    }
}

/// The queue filter the query string names; a value the queue does not know is refused.
#[cfg(feature = "ssr")]
pub(crate) fn queue_filter(
    state: &Option<String>,
    adapter: &Option<String>,
    definition: &Option<String>,
    older_than: &Option<String>,
) -> Result<engine::read::queue::QueueFilter, ConsoleError> {
    use engine::domain::StepState;

    let blank = |v: &Option<String>| text_filter(v);
    let invalid = |what: &str| {
        ConsoleError::Invalid {
            reason: format!(
                "{what} is not a filter the queue knows; clear the filters and try again."
            ),
        }
        .answered()
    };
    Ok(engine::read::queue::QueueFilter {
        state: match blank(state)? {
            None => None,
            Some(name) => Some(
                StepState::ALL
                    .into_iter()
                    .find(|s| format!("{s:?}").to_lowercase() == name.replace('_', ""))
                    .ok_or_else(|| invalid("That state"))?,
            ),
        },
        adapter: blank(adapter)?,
        definition: blank(definition)?,
        older_than_secs: match blank(older_than)? {
            None => None,
            Some(minutes) => Some(age_in_seconds(&minutes)?),
        },
        noted_since: None,
        creation_key_prefix: None,
    })
}

/// Since when a note must have been written for the queue's "has a note" filter: the start of
/// today (UTC), a week ago, or ever.
#[cfg(feature = "ssr")]
fn noted_since(
    noted: &Option<String>,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, ConsoleError> {
    use chrono::{DateTime, Duration, Utc};
    let now = Utc::now();
    Ok(match text_filter(noted)?.as_deref() {
        None => None,
        Some("today") => now.date_naive().and_hms_opt(0, 0, 0).map(|t| t.and_utc()),
        Some("week") => Some(now - Duration::days(7)),
        Some("any") => Some(DateTime::<Utc>::UNIX_EPOCH),
        Some(_) => {
            return Err(ConsoleError::Invalid {
                reason:
                    "That note filter is not one the queue knows; clear the filters and try again."
                        .into(),
            }
            .answered());
        }
    })
}

/// The longest text a queue filter or search accepts.
#[cfg(feature = "ssr")]
const LONGEST_FILTER: usize = 200;

/// The most minutes the age filter accepts: ten years.
#[cfg(feature = "ssr")]
pub(crate) const OLDEST_MINUTES: i64 = 10 * 365 * 24 * 60;

/// A text filter trimmed, none when blank; refused when longer than a filter can be or when it
/// carries a NUL (which PostgreSQL cannot compare).
#[cfg(feature = "ssr")]
pub(crate) fn text_filter(v: &Option<String>) -> Result<Option<String>, ConsoleError> {
    match v.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(text) if text.chars().count() > LONGEST_FILTER || text.contains('\0') => {
            Err(ConsoleError::Invalid {
                reason: format!(
                    "A filter or search is at most {LONGEST_FILTER} characters, none of them NUL; shorten it and try again."
                ),
            }
            .answered())
        }
        Some(text) => Ok(Some(text.to_owned())),
    }
}

/// The age filter's minutes as seconds: a whole number from 0 to [`OLDEST_MINUTES`].
#[cfg(feature = "ssr")]
fn age_in_seconds(minutes: &str) -> Result<i64, ConsoleError> {
    minutes
        .parse::<i64>()
        .ok()
        .filter(|m| (0..=OLDEST_MINUTES).contains(m))
        .map(|m| m * 60)
        .ok_or_else(|| {
            ConsoleError::Invalid {
                reason: format!(
                    "older_than must be a number of minutes between 0 and {OLDEST_MINUTES} (ten years)."
                ),
            }
            .answered()
        })
}
