//! `z29c archive`: the archiver's standing, a turn run now, an archived workflow read back,
//! and the archive verified (docs/DESIGN.md §21, docs/operations.md).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use engine::archive::{ArchiveDir, Archiver};

use crate::cli::archive::{ArchiveArgs, ArchiveCommand};
use crate::database::Database;

pub(crate) async fn run(command: ArchiveCommand) -> anyhow::Result<ExitCode> {
    match command {
        ArchiveCommand::Status(args) => status(args).await,
        ArchiveCommand::Run(args) => run_now(args).await,
        ArchiveCommand::Show { id, args } => show(id, args).await,
        ArchiveCommand::Verify(args) => verify(args).await,
    }
}

fn archive_dir(args: &ArchiveArgs) -> anyhow::Result<ArchiveDir> {
    let dir = &args.retention.archive_dir;
    ArchiveDir::open(dir).with_context(|| format!("opening the archive at {}", dir.display()))
}

async fn status(args: ArchiveArgs) -> anyhow::Result<ExitCode> {
    let db = Database::open(&args.database).await?;
    let status = engine::archive::status(&db.pool, &args.retention.policy()).await?;
    db.close().await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("archived workflows   {}", status.workflows);
    println!("archived audit       {}", status.audit_entries);
    println!("events dropped       {}", status.events);
    println!("bytes written        {}", status.bytes);
    match status.last_turn_at {
        Some(at) => println!("last turn            {at} ({:.1} s)", status.last_turn_secs),
        None => println!("last turn            none yet"),
    }
    match status.oldest_eligible {
        Some(at) => println!(
            "oldest eligible      settled {at}, {:.0} s past its retention",
            status.lag_secs
        ),
        None => println!("oldest eligible      none: nothing is past its retention"),
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_now(args: ArchiveArgs) -> anyhow::Result<ExitCode> {
    let db = Database::open(&args.database).await?;
    let archiver = Archiver::new(
        db.pool.clone(),
        archive_dir(&args)?,
        args.retention.policy(),
    );
    let mut total = engine::archive::Moved::default();
    loop {
        let (moved, left) = archiver.turn(Duration::from_secs(60)).await?;
        total = total.plus(moved);
        if !left {
            break;
        }
    }
    db.close().await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&total)?);
    } else {
        println!(
            "archived {} workflow(s) and {} audit entr(ies) in {} batch(es), {} bytes; dropped {} passed event(s)",
            total.workflows, total.audit_entries, total.batches, total.bytes, total.events
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(id: uuid::Uuid, args: ArchiveArgs) -> anyhow::Result<ExitCode> {
    let db = Database::open(&args.database).await?;
    let dir = archive_dir(&args)?;
    let archived = engine::archive::show(&db.pool, &dir, id).await;
    // A workflow back hot after a restore: the copy the archive keeps, said to be one.
    let copy = match &archived {
        Ok(None) => engine::archive::copy_of(&db.pool, &dir, id).await,
        _ => Ok(None),
    };
    db.close().await?;
    let archived = match (archived?, copy?) {
        (Some(archived), _) => archived,
        (None, Some(copy)) => {
            eprintln!(
                "workflow {id} is in the hot tables; the archive holds a copy of it written while \
                 the database held it (a restore from an older backup, or archiving that stopped \
                 before removing it):"
            );
            copy
        }
        (None, None) => {
            eprintln!("workflow {id} is not archived");
            return Ok(ExitCode::FAILURE);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&archived)?);
        return Ok(ExitCode::SUCCESS);
    }
    let t = &archived.tombstone;
    let status = archived.status();
    println!("workflow      {}", t.id);
    println!(
        "definition    {} v{}",
        t.definition_name, t.definition_version
    );
    println!("creation key  {}", t.creation_key);
    println!("state         {:?}: {}", t.state, status.status);
    println!("settled       {}", t.settled_at);
    println!(
        "archived on   {} in {} at byte {}",
        t.archived_at, t.archive_file, t.member_offset
    );
    for step in &status.steps {
        println!(
            "  {:<20} {:<16} {}",
            step.logical,
            step.label,
            step.external_reference.as_deref().unwrap_or("")
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn verify(args: ArchiveArgs) -> anyhow::Result<ExitCode> {
    let db = Database::open(&args.database).await?;
    let dir = archive_dir(&args)?;
    let report = engine::archive::verify(&db.pool, &dir).await;
    db.close().await?;
    let report = report?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} day file(s), {} record(s), {} tombstone(s) read back",
            report.files, report.records, report.tombstones
        );
        for finding in &report.findings {
            println!("    {}: {}", finding.file, finding.problem);
        }
        if report.findings.is_empty() {
            println!("the archive is whole");
        }
    }
    Ok(if report.findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
