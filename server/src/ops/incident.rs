//! `z29c incident show|resolve`: a duplicate-effect incident, and its resolution through
//! `engine::recovery::incident::resolve_incident` as the console's incident page takes it.

use engine::read::incident::IncidentDetail;
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
