//! `z29c workflow list|show|cancel|pause|resume`: the API's workflow search, the status
//! projection, cancelling every unsettled step through `engine::recovery::cancel`, and pausing
//! through `engine::recovery::pause`.

use chrono::Utc;
use engine::read::status::WorkflowStatus;
use engine::read::workflows::{self, WorkflowQuery};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use super::print::{self, Table};
use super::{Io, Stop, operator, refusal};
use crate::cli::ops::{Acting, WorkflowCommand, WorkflowListArgs};

/// Runs one `z29c workflow` command.
pub(super) async fn run(
    pool: &PgPool,
    command: WorkflowCommand,
    io: &mut Io<'_>,
) -> Result<(), Stop> {
    match command {
        WorkflowCommand::List(args) => list(pool, &args, io).await,
        WorkflowCommand::Show { id, output, .. } => {
            let status = engine::read::status::project(pool, id)
                .await?
                .ok_or_else(|| Stop::Refused(no_workflow(id)))?;
            if output.json {
                print::json(io.out, &status)?;
            } else {
                write_status(io, &status)?;
            }
            Ok(())
        }
        WorkflowCommand::Cancel { id, acting } => {
            let operator = operator(pool, &acting.operator).await?;
            let cancelled =
                engine::recovery::cancel::cancel_workflow(pool, &operator, id, &acting.reason)
                    .await
                    .map_err(|e| refusal(e, &no_workflow(id)))?;
            if acting.output.json {
                let document = json!({ "message": cancelled.message, "steps": cancelled.steps });
                print::json(io.out, &document)?;
            } else {
                writeln!(io.out, "{}", cancelled.message)?;
            }
            Ok(())
        }
        WorkflowCommand::Pause { id, acting } => pause(pool, id, &acting, false, io).await,
        WorkflowCommand::Resume { id, acting } => pause(pool, id, &acting, true, io).await,
        WorkflowCommand::PauseMatching {
            state,
            definition,
            adapter,
            older_than,
            acting,
        } => {
            let query = WorkflowQuery {
                state,
                definition,
                adapter,
                created_before: older_than
                    .map(|minutes| Utc::now() - chrono::Duration::minutes(i64::from(minutes))),
                creation_key: None,
                request_key: None,
                external_reference: None,
                creation_key_prefix: None,
                key: None,
                after: None,
                limit: workflows::MAX_PAGE,
            };
            pause_matching(pool, query, &acting, io).await
        }
    }
}

/// Pauses the workflows `query` matches, page by page up to the bulk pause's bound.
async fn pause_matching(
    pool: &PgPool,
    mut query: WorkflowQuery,
    acting: &Acting,
    io: &mut Io<'_>,
) -> Result<(), Stop> {
    use engine::recovery::pause::{MAX_PAUSED_AT_ONCE, pause_workflows};
    let operator = operator(pool, &acting.operator).await?;
    let mut matching = Vec::new();
    while matching.len() < MAX_PAUSED_AT_ONCE {
        let page = workflows::list(pool, &query).await?;
        matching.extend(page.workflows.iter().map(|w| w.id));
        match page.next {
            Some(next) => query.after = Some(next),
            None => break,
        }
    }
    matching.truncate(MAX_PAUSED_AT_ONCE);
    if matching.is_empty() {
        return Err(Stop::Refused(
            "No workflow matches: nothing was paused.".into(),
        ));
    }
    let done = pause_workflows(pool, &operator, &matching, &acting.reason)
        .await
        .map_err(|e| refusal(e, "No workflow matches."))?;
    if acting.output.json {
        let document = json!({
            "message": done.message, "paused": done.paused, "left": done.left, "steps": done.steps,
        });
        print::json(io.out, &document)?;
    } else {
        writeln!(io.out, "{}", done.message)?;
    }
    Ok(())
}

/// Pauses workflow `id`, or resumes it.
async fn pause(
    pool: &PgPool,
    id: Uuid,
    acting: &Acting,
    resume: bool,
    io: &mut Io<'_>,
) -> Result<(), Stop> {
    use engine::recovery::pause::{pause_workflow, resume_workflow};
    let operator = operator(pool, &acting.operator).await?;
    let done = if resume {
        resume_workflow(pool, &operator, id, &acting.reason).await
    } else {
        pause_workflow(pool, &operator, id, &acting.reason).await
    }
    .map_err(|e| refusal(e, &no_workflow(id)))?;
    if acting.output.json {
        let document = json!({ "message": done.message, "pause": done.pause, "steps": done.steps });
        print::json(io.out, &document)?;
    } else {
        writeln!(io.out, "{}", done.message)?;
    }
    Ok(())
}

fn no_workflow(id: Uuid) -> String {
    format!("No workflow has the id {id}.")
}

/// Prints one page: a table and the next page's cursor, or (JSON) one object per workflow
/// and, last, `{"next": …}` when there is a next page.
async fn list(pool: &PgPool, args: &WorkflowListArgs, io: &mut Io<'_>) -> Result<(), Stop> {
    let query = WorkflowQuery {
        state: args.state,
        definition: args.definition.clone(),
        adapter: args.adapter.clone(),
        created_before: args
            .older_than
            .map(|minutes| Utc::now() - chrono::Duration::minutes(i64::from(minutes))),
        creation_key: args.creation_key.clone(),
        request_key: args.request_key.clone(),
        external_reference: args.external_reference.clone(),
        creation_key_prefix: None,
        key: None,
        after: args.after,
        limit: args.limit,
    };
    let page = workflows::list(pool, &query).await?;
    if args.output.json {
        print::json_lines(io.out, &page.workflows)?;
        if let Some(next) = page.next {
            print::json(io.out, &json!({ "next": next }))?;
        }
        return Ok(());
    }
    let mut table = Table::new(&["workflow", "state", "definition", "creation key", "created"]);
    for w in &page.workflows {
        table.row(vec![
            w.id.to_string(),
            print::name_of(&w.state),
            format!("{} v{}", w.definition, w.definition_version),
            w.creation_key.clone(),
            print::time(w.created_at),
        ]);
    }
    if table.is_empty() {
        writeln!(io.out, "No workflow matches.")?;
    } else {
        table.write(io.out)?;
    }
    if let Some(next) = page.next {
        writeln!(
            io.out,
            "\nmore: z29c workflow list --after {next} (with the same filters)"
        )?;
    }
    Ok(())
}

fn write_status(io: &mut Io<'_>, w: &WorkflowStatus) -> std::io::Result<()> {
    let mut fields = vec![
        ("workflow", w.id.to_string()),
        ("creation key", w.creation_key.clone()),
        (
            "definition",
            format!("{} v{}", w.definition, w.definition_version),
        ),
        ("state", print::name_of(&w.state)),
        ("status", w.status.clone()),
        ("created", print::time(w.created_at)),
        ("updated", print::time(w.updated_at)),
    ];
    if let Some(p) = &w.paused {
        let since = print::time(p.paused_at);
        fields.push((
            "paused",
            format!("by {} since {since}: {}", p.paused_by, p.reason),
        ));
    }
    print::fields(io.out, &fields)?;
    let mut steps = Table::new(&[
        "step",
        "logical",
        "state",
        "attempts",
        "request key",
        "external reference",
    ]);
    for s in &w.steps {
        let logical = match s.generation {
            0 => s.logical.clone(),
            n => format!("{} (replacement {n})", s.logical),
        };
        steps.row(vec![
            s.id.to_string(),
            logical,
            print::name_of(&s.state),
            s.attempts.to_string(),
            print::or_dash(s.request_key.as_deref()),
            print::or_dash(s.external_reference.as_deref()),
        ]);
    }
    writeln!(io.out, "\nsteps (z29c step show ID):")?;
    steps.write(io.out)
}
