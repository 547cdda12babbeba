//! `z29c apply`, `z29c definitions list` and `z29c render`: definition files checked, stored and
//! rendered (docs/DESIGN.md §16).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use engine::definition::{Applied, Definition, StepKind};
use engine::domain::{InputDigest, RequestKey, StepKey};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::cli::{ApplyArgs, DefinitionsCommand, RenderArgs};
use crate::database::Database;

/// The files `paths` name: each file, and every `*.yaml` in each directory, sorted.
fn files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("reading {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            inside.sort();
            found.extend(inside);
        } else {
            found.push(path.clone());
        }
    }
    Ok(found)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// Checks every file first and stores only when all of them pass; prints what each did.
pub(crate) async fn apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let files = files(&args.files)?;
    let mut sources = Vec::new();
    for path in &files {
        let source = read(path)?;
        if let Err(error) = Definition::from_source(&source) {
            eprintln!("{}: {error}", path.display());
            return Ok(ExitCode::FAILURE);
        }
        sources.push((path, source));
    }
    let db = Database::open(&args.database).await?;
    let mut failed = false;
    for (path, source) in &sources {
        match engine::definition::apply(&db.pool, source, "cli", args.dry_run).await {
            Ok(Applied::Added { name, version }) if args.dry_run => {
                println!("{}: would add definition {name} v{version}", path.display())
            }
            Ok(Applied::Added { name, version }) => {
                println!("{}: added definition {name} v{version}", path.display())
            }
            Ok(Applied::Unchanged { name, version }) => {
                println!(
                    "{}: definition {name} v{version} is applied already, unchanged",
                    path.display()
                )
            }
            Err(error) => {
                eprintln!("{}: {error}", path.display());
                failed = true;
            }
        }
    }
    db.close().await?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `z29c definitions list`.
pub(crate) async fn definitions(command: DefinitionsCommand) -> anyhow::Result<ExitCode> {
    let DefinitionsCommand::List { json, database } = command;
    let db = Database::open(&database).await?;
    let rows = engine::store::definition::all(&db.pool).await?;
    db.close().await?;
    if json {
        for row in rows {
            println!(
                "{}",
                json!({ "name": row.name, "version": row.version, "digest": row.digest,
                        "applied_by": row.applied_by, "applied_at": row.applied_at })
            );
        }
    } else {
        println!("{:<28} {:>7}  {:<20}  applied", "name", "version", "by");
        for row in rows {
            println!(
                "{:<28} {:>7}  {:<20}  {}",
                row.name,
                row.version,
                row.applied_by,
                row.applied_at.format("%Y-%m-%d %H:%M:%SZ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `z29c render`: every step in order, under a fixed workflow id (all zeros), so the output
/// is the same on every run and every machine.
pub(crate) async fn render(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let definition = match Definition::from_source(&read(&args.definition)?) {
        Ok(definition) => definition,
        Err(error) => {
            eprintln!("{}: {error}", args.definition.display());
            return Ok(ExitCode::FAILURE);
        }
    };
    let input: Value = serde_json::from_str(&read(&args.input)?)
        .with_context(|| format!("{} is not JSON", args.input.display()))?;
    let stand_ins: Value = match &args.receipts {
        Some(path) => serde_json::from_str(&read(path)?)
            .with_context(|| format!("{} is not JSON", path.display()))?,
        None => json!({}),
    };
    let input = definition.normalize(&input)?;
    println!("input digest: {}", InputDigest::of_json(&input));
    let mut facts = serde_json::Map::new();
    for step in definition.steps() {
        let key = RequestKey::derive(
            Uuid::nil(),
            &StepKey::new(&step.logical, definition.version()),
        );
        let facts_so_far = Value::Object(facts.clone());
        match step.kind {
            StepKind::Pure => {
                let output = definition.run_pure(&step.logical, &input, &facts_so_far)?;
                println!("step {} (pure): {}", step.logical, output);
                facts.insert(step.logical.clone(), output);
            }
            _ => {
                let adapter = definition.adapter_for(&step.logical, &input)?;
                let rendered = definition.render_request(
                    &step.logical,
                    key.as_str(),
                    &input,
                    &facts_so_far,
                )?;
                let bytes = engine::domain::identity::canonical_json(&rendered.request);
                println!(
                    "step {} (external, adapter {adapter}, key {key}):\n  request: {}\n  request digest: {}\n  content digest: {}",
                    step.logical,
                    String::from_utf8_lossy(&bytes),
                    InputDigest::of_bytes(&bytes),
                    rendered.content_digest,
                );
                let receipt = stand_ins.get(&step.logical).cloned().unwrap_or_else(|| {
                    json!({
                        "external_reference": format!("stand-in-{}", step.logical),
                        "input_digest": InputDigest::of_bytes(&bytes),
                        "request_key": key.as_str(),
                    })
                });
                facts.insert(step.logical.clone(), receipt);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
