use leptos::prelude::*;

use crate::error::ConsoleError;

/// Adds note `text` to `on` ("workflow", "step" or "incident") `id`, then comes back to its page.
#[server(prefix = "/fn")]
pub async fn add_note(
    on: String,
    id: String,
    text: String,
    csrf: String,
) -> Result<String, ConsoleError> {
    use crate::auth::api::session;
    use engine::store::note::NoteOn;

    let (operator, current, pool) = session::acting(&csrf).await?;
    let uuid = uuid::Uuid::parse_str(&id).map_err(|_| ConsoleError::NotFound.answered())?;
    let (target, page) = match on.as_str() {
        "workflow" => (NoteOn::Workflow(uuid), format!("/workflows/{uuid}")),
        "step" => (NoteOn::Step(uuid), format!("/steps/{uuid}")),
        "incident" => (NoteOn::Incident(uuid), format!("/incidents/{uuid}")),
        _ => return Err(ConsoleError::NotFound.answered()),
    };
    engine::recovery::note::add_note(&pool, &operator, target, &text)
        .await
        .map_err(|e| ConsoleError::from(e).answered())?;
    let message = "Noted: the note is in the timeline and the audit log.".to_owned();
    session::set_notice(&current, &message).await?;
    leptos_axum::redirect(&page);
    Ok(message)
}

/// The note form of the page about `id`, for `operator`.
#[cfg(feature = "ssr")]
pub(crate) async fn note_form(
    operator: &engine::operators::Operator,
    id: uuid::Uuid,
) -> Result<super::types::NoteForm, ConsoleError> {
    use crate::auth::api::session;
    use leptos::server_fn::ServerFn;

    let current = session::current().await?;
    let kept = session::take_form(AddNote::PATH)
        .await?
        .filter(|kept| kept.field("id") == Some(id.to_string().as_str()));
    Ok(super::types::NoteForm {
        may_note: operator.role >= engine::domain::Role::Operator,
        csrf: session::csrf_token(&current).await?,
        kept,
    })
}

/// The notes of workflow `workflow` whose `keep` holds, as a page lists them.
#[cfg(feature = "ssr")]
pub(crate) async fn notes_of(
    pool: &sqlx::PgPool,
    workflow: uuid::Uuid,
    keep: impl Fn(&engine::store::note::Note) -> bool,
) -> Result<Vec<super::types::NoteLine>, ConsoleError> {
    Ok(engine::store::note::of_workflow(pool, workflow)
        .await?
        .into_iter()
        .filter(|n| keep(n))
        .map(|n| super::types::NoteLine {
            at: n.at.format("%Y-%m-%d %H:%M UTC").to_string(),
            about: match (n.incident, n.step) {
                (Some(_), _) => "an incident".to_owned(),
                (None, Some(_)) => "a step".to_owned(),
                (None, None) => "the workflow".to_owned(),
            },
            author: n.author,
            text: n.text,
        })
        .collect())
}
