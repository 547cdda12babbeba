use leptos::prelude::*;

use crate::error::ConsoleError;

/// Workflow `id` as its status shows it: from the hot tables, else read back from the archive
/// with its evidence (docs/DESIGN.md §21).
#[cfg(feature = "ssr")]
async fn project(
    id: &str,
) -> Result<
    (
        engine::read::status::WorkflowStatus,
        Option<engine::archive::Archived>,
    ),
    ConsoleError,
> {
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let id = uuid::Uuid::parse_str(id).map_err(|_| ConsoleError::NotFound.answered())?;
    if let Some(status) = engine::read::status::project(&pool, id).await? {
        return Ok((status, None));
    }
    let archive = use_context::<engine::archive::ArchiveDir>().ok_or(ConsoleError::Internal)?;
    match engine::archive::show(&pool, &archive, id).await {
        Ok(Some(archived)) => Ok((archived.status(), Some(archived))),
        Ok(None) => Err(ConsoleError::NotFound.answered()),
        Err(error) => {
            tracing::error!(%error, %id, "an archived workflow's record cannot be read back");
            Err(ConsoleError::Conflict {
                reason: format!(
                    "workflow {id} is archived, and its record cannot be read back from the archive: {error}"
                ),
            })
        }
    }
}

/// The archive's copy of hot workflow `id`, if reconciling after a restore noted one: what to
/// say of it, and its evidence in lines. A copy that cannot be read back is said so, with no
/// lines: the page still shows what the database holds.
#[cfg(feature = "ssr")]
async fn copy_of(
    pool: &sqlx::PgPool,
    id: uuid::Uuid,
) -> Result<Option<(String, Vec<String>)>, ConsoleError> {
    let archive = use_context::<engine::archive::ArchiveDir>().ok_or(ConsoleError::Internal)?;
    let copy = match engine::archive::copy_of(pool, &archive, id).await {
        Ok(Some(copy)) => copy,
        Ok(None) => return Ok(None),
        Err(error) => {
            tracing::error!(%error, %id, "the archive's copy of a workflow cannot be read back");
            let said = format!(
                "The archive holds a copy of this workflow, written while the database still \
                 holds it, and it cannot be read back: {error}"
            );
            return Ok(Some((said, Vec::new())));
        }
    };
    let t = &copy.tombstone;
    let said = format!(
        "The archive holds a copy of this workflow, written on {} while the database still holds \
         it: the database was restored from a backup taken before, or archiving stopped before \
         removing it. In that copy it is {} (settled {}). Compare its evidence, below, with the \
         steps above before acting on a step.",
        t.archived_at.format("%Y-%m-%d %H:%M UTC"),
        t.state.label(),
        t.settled_at.format("%Y-%m-%d %H:%M UTC"),
    );
    Ok(Some((said, evidence_lines(&copy))))
}

/// An archived workflow's evidence in lines, oldest first: each receipt and each audit entry.
#[cfg(feature = "ssr")]
fn evidence_lines(archived: &engine::archive::Archived) -> Vec<String> {
    let e = &archived.evidence;
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let logical = |step: &serde_json::Value| {
        e["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["id"] == *step)
            .map(|s| text(&s["logical"]))
            .unwrap_or_default()
    };
    let receipts = e["receipts"].as_array().into_iter().flatten().map(|r| {
        (
            text(&r["created_at"]),
            format!(
                "receipt for {}: {} by {}, reference {}",
                logical(&r["step_id"]),
                text(&r["completion_state"]),
                text(&r["method"]),
                text(&r["external_reference"])
            ),
        )
    });
    let audit = e["audit"].as_array().into_iter().flatten().map(|a| {
        let reason = a["reason"]
            .as_str()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        (
            text(&a["at"]),
            format!(
                "{} ({}) {}{reason}",
                text(&a["actor"]),
                text(&a["actor_kind"]),
                text(&a["action"])
            ),
        )
    });
    let mut lines: Vec<(String, String)> = receipts.chain(audit).collect();
    lines.sort();
    lines
        .into_iter()
        .map(|(at, line)| format!("{} · {line}", at.get(..19).unwrap_or(&at).replace('T', " ")))
        .collect()
}

/// Every step of workflow `id`, for operators, with its pause and the form that pauses or
/// resumes it.
#[server(prefix = "/fn")]
pub async fn workflow_steps(id: String) -> Result<super::types::WorkflowData, ConsoleError> {
    use crate::auth::api::session;
    use engine::domain::{Role, WorkflowState};

    let operator = session::require(Role::Viewer).await?;
    let current = session::current().await?;
    let (w, archived) = project(&id).await?;
    let kept = {
        use leptos::server_fn::ServerFn;
        let path = if w.paused.is_some() {
            ResumeWorkflow::PATH
        } else {
            PauseWorkflow::PATH
        };
        session::take_form(path)
            .await?
            .filter(|kept| kept.field("workflow") == Some(w.id.to_string().as_str()))
    };
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let copy = match archived {
        Some(_) => None,
        None => copy_of(&pool, w.id).await?,
    };
    Ok(super::types::WorkflowData {
        copy: copy.as_ref().map(|(said, _)| said.clone()),
        archived: archived.as_ref().map(|a| {
            let t = &a.tombstone;
            format!(
                "Archived on {} (settled {}): read back from {} in the archive.",
                t.archived_at.format("%Y-%m-%d %H:%M UTC"),
                t.settled_at.format("%Y-%m-%d %H:%M UTC"),
                t.archive_file
            )
        }),
        evidence: match (&archived, copy) {
            (Some(archived), _) => evidence_lines(archived),
            (None, Some((_, lines))) => lines,
            (None, None) => Vec::new(),
        },
        notes: crate::notes::api::notes_of(&pool, w.id, |_| true).await?,
        note: crate::notes::api::note_form(&operator, w.id).await?,
        paused: w.paused.map(|p| {
            let since = p.paused_at.format("%Y-%m-%d %H:%M UTC");
            format!("Paused by {} since {since}: {}", p.paused_by, p.reason)
        }),
        may_pause: operator.role >= Role::Operator
            && !matches!(w.state, WorkflowState::Completed | WorkflowState::Cancelled),
        csrf: session::csrf_token(&current).await?,
        notice: session::take_notice(&current).await?,
        kept,
        id: w.id.to_string(),
        creation_key: w.creation_key,
        definition: format!("{} v{}", w.definition, w.definition_version),
        state: w.state.label().to_owned(),
        status: w.status,
        steps: w
            .steps
            .into_iter()
            .map(|s| super::types::StepRow {
                id: s.id.to_string(),
                logical: s.logical,
                generation: s.generation,
                state: s.state,
                attempts: s.attempts,
                request_key: s.request_key.unwrap_or_default(),
                external_reference: s.external_reference.unwrap_or_default(),
                depends_on: s.depends_on,
            })
            .collect(),
    })
}

/// The one sentence the customer of workflow `id` reads, from the status projection. Public:
/// the workflow id is the capability, and the sentence names no internal detail beyond an
/// external reference.
#[server(prefix = "/fn")]
pub async fn customer_status(id: String) -> Result<(String, String), ConsoleError> {
    let pool = use_context::<sqlx::PgPool>().ok_or(ConsoleError::Internal)?;
    let id = uuid::Uuid::parse_str(&id).map_err(|_| ConsoleError::NotFound.answered())?;
    let (sentence, at) = match engine::read::status::customer_status(&pool, id).await? {
        Some(said) => said,
        // An archived workflow says what its status said when it left.
        None => {
            let archive =
                use_context::<engine::archive::ArchiveDir>().ok_or(ConsoleError::Internal)?;
            let archived = engine::archive::show(&pool, &archive, id)
                .await
                .map_err(|_| ConsoleError::Internal)?
                .ok_or_else(|| ConsoleError::NotFound.answered())?;
            let status = archived.status();
            (status.status, status.updated_at)
        }
    };
    Ok((sentence, at.format("%Y-%m-%d %H:%M UTC").to_string()))
}

/// Pauses workflow `workflow` (operator): no step of it starts until it is resumed.
#[server(prefix = "/fn")]
pub async fn pause_workflow(
    workflow: String,
    reason: String,
    csrf: String,
) -> Result<String, ConsoleError> {
    pausing(workflow, reason, csrf, false).await
}

/// Resumes workflow `workflow` (operator): its held steps go back to the queue.
#[server(prefix = "/fn")]
pub async fn resume_workflow(
    workflow: String,
    reason: String,
    csrf: String,
) -> Result<String, ConsoleError> {
    pausing(workflow, reason, csrf, true).await
}

#[cfg(feature = "ssr")]
async fn pausing(
    workflow: String,
    reason: String,
    csrf: String,
    resume: bool,
) -> Result<String, ConsoleError> {
    use crate::auth::api::session;
    use engine::recovery::pause::{pause_workflow, resume_workflow};

    let (operator, current, pool) = session::acting(&csrf).await?;
    let id = uuid::Uuid::parse_str(&workflow).map_err(|_| ConsoleError::NotFound.answered())?;
    let done = if resume {
        resume_workflow(&pool, &operator, id, &reason).await
    } else {
        pause_workflow(&pool, &operator, id, &reason).await
    }
    .map_err(|e| ConsoleError::from(e).answered())?;
    session::set_notice(&current, &done.message).await?;
    leptos_axum::redirect(&format!("/workflows/{id}"));
    Ok(done.message)
}
