//! `z29c incident list|show|resolve`: the open incidents a page at a time, one incident, and
//! its resolution through `engine::recovery::incident::resolve_incident` as the console's
//! incident page takes it.

use engine::read::incident::IncidentDetail;
use engine::read::queue::{IncidentRow, open_incident_page};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use super::print::{self, Table};
use super::{Io, Stop, operator, refusal};
use crate::cli::ops::IncidentCommand;

/// Runs one `z29c incident` command.
pub(super) async fn run(
    pool: &PgPool,
    command: IncidentCommand,
    io: &mut Io<'_>,
) -> Result<(), Stop> {
    match command {
        IncidentCommand::List {
            limit,
            after,
            output,
            ..
        } => list(pool, limit, after.as_deref(), output.json, io).await,
        IncidentCommand::Show { id, output, .. } => show(pool, id, output.json, io).await,
        IncidentCommand::Resolve {
            id,
            canonical,
            disposition,
            acting,
        } => {
            let operator = operator(pool, &acting.operator).await?;
            let done = engine::recovery::incident::resolve_incident(
                pool,
                &operator,
                id,
                &canonical,
                disposition,
                &acting.reason,
            )
            .await
            .map_err(|e| refusal(e, &no_incident(id)))?;
            if acting.output.json {
                print::json(
                    io.out,
                    &json!({ "message": done.message, "step": done.step }),
                )?;
            } else {
                writeln!(io.out, "{}", done.message)?;
            }
            Ok(())
        }
    }
}

/// One page of the open incidents: a table and the next page's command, or one JSON document
/// with `incidents`, `next` and `open`.
async fn list(
    pool: &PgPool,
    limit: i64,
    after: Option<&str>,
    json: bool,
    io: &mut Io<'_>,
) -> Result<(), Stop> {
    let after = after.map(print::cursor).transpose()?;
    let page = open_incident_page(pool, limit, None, after).await?;
    let (incidents, open) = (page.rows, page.open);
    let next = page.next.map(engine::read::keyset::format);
    if json {
        print::json(
            io.out,
            &json!({ "incidents": incidents, "next": next, "open": open }),
        )?;
        return Ok(());
    }
    if incidents.is_empty() {
        writeln!(io.out, "No incident is open.")?;
        return Ok(());
    }
    writeln!(io.out, "{open} open, oldest first:")?;
    write_list(io, &incidents)?;
    if let Some(next) = next {
        writeln!(io.out, "\nmore: z29c incident list --after '{next}'")?;
    }
    Ok(())
}

/// Open incidents as a table.
pub(super) fn write_list(io: &mut Io<'_>, incidents: &[IncidentRow]) -> std::io::Result<()> {
    let now = chrono::Utc::now();
    let mut table = Table::new(&["incident", "kind", "open for", "workflow", "references"]);
    for i in incidents {
        table.row(vec![
            i.incident_id.to_string(),
            i.kind.as_str().to_owned(),
            print::age(i.opened_at, now),
            i.creation_key.clone(),
            i.references.join(", "),
        ]);
    }
    table.write(io.out)
}

fn no_incident(id: Uuid) -> String {
    format!("No incident has the id {id}.")
}

async fn show(pool: &PgPool, id: Uuid, json: bool, io: &mut Io<'_>) -> Result<(), Stop> {
    let incident = engine::read::incident::incident(pool, id)
        .await?
        .ok_or_else(|| Stop::Refused(no_incident(id)))?;
    if json {
        print::json(io.out, &incident)?;
        return Ok(());
    }
    write_incident(io, &incident)?;
    Ok(())
}

fn write_incident(io: &mut Io<'_>, i: &IncidentDetail) -> std::io::Result<()> {
    let resolution = i.resolution.as_ref().map_or_else(
        || "open (z29c incident resolve ID --canonical REFERENCE --disposition …)".to_owned(),
        |r| {
            format!(
                "{} stands; {} — by {} at {}: {}",
                r.canonical_reference,
                r.disposition.replace('_', " "),
                r.resolved_by,
                print::time(r.resolved_at),
                r.reason
            )
        },
    );
    print::fields(
        io.out,
        &[
            ("incident", i.id.to_string()),
            ("kind", i.kind.words().to_owned()),
            ("opened", print::time(i.opened_at)),
            ("step", format!("{} ({})", i.step_id, i.logical)),
            (
                "workflow",
                format!("{} ({})", i.workflow_id, i.creation_key),
            ),
            ("adapter", print::or_dash(i.adapter.as_deref())),
            ("request key", print::or_dash(i.request_key.as_deref())),
            (
                "withdrawable",
                if i.withdrawable { "yes" } else { "no" }.to_owned(),
            ),
            ("resolution", resolution),
        ],
    )?;
    let mut references = Table::new(&[
        "external reference",
        "request key",
        "observed",
        "on receipt",
        "evidence",
    ]);
    for r in &i.references {
        let evidence = if r.evidence.as_object().is_some_and(|o| o.is_empty()) {
            "seen by a status lookup".to_owned()
        } else {
            r.evidence.to_string()
        };
        references.row(vec![
            r.external_reference.clone(),
            print::or_dash(r.request_key.as_deref()),
            print::time(r.observed_at),
            if r.on_receipt { "yes" } else { "no" }.to_owned(),
            evidence,
        ]);
    }
    writeln!(io.out, "\nreferences:")?;
    references.write(io.out)?;
    if !i.withdrawals.is_empty() {
        let mut withdrawals = Table::new(&["withdrawal step", "reference", "state"]);
        for (step, reference, state) in &i.withdrawals {
            withdrawals.row(vec![
                step.to_string(),
                reference.clone(),
                print::name_of(state),
            ]);
        }
        writeln!(io.out, "\nwithdrawals:")?;
        withdrawals.write(io.out)?;
    }
    Ok(())
}
