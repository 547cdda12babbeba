//! Definition and adapter files (docs/DESIGN.md §16): `z29c apply`, `z29c definitions list`,
//! `z29c render`, `z29c adapter list` and `z29c adapter verify`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use engine::definition::{Applied, Definition};
use engine::domain::StepKind;
use engine::domain::{InputDigest, RequestKey, StepKey};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::cli::{ApplyArgs, DefinitionsCommand, RenderArgs};
use crate::database::{Database, DatabaseArgs};

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

/// What kind of file `source` is: an adapter file has `deliver`, a definition `steps`.
enum FileKind {
    Definition,
    Adapter,
}

/// What kind of file `source` is, or why it is not YAML at all (with the line and column).
fn kind_of(source: &str) -> Result<FileKind, engine::file_error::FileError> {
    use engine::file_error::FileError;
    let value: serde_yaml_ng::Value = engine::yaml::parse(source)?;
    let map = value.as_mapping();
    if map.is_some_and(|m| m.contains_key("deliver")) {
        Ok(FileKind::Adapter)
    } else if map.is_some_and(|m| m.contains_key("steps")) {
        Ok(FileKind::Definition)
    } else {
        Err(FileError::at(
            None,
            "neither a definition (it has no `steps`) nor an adapter (it has no `deliver`)",
        ))
    }
}

/// Checks every file first and stores only when all of them pass, adapters before the
/// definitions that name them; prints what each did.
pub(crate) async fn apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let mut adapters = Vec::new();
    let mut definitions = Vec::new();
    for path in files(&args.files)? {
        let source = read(&path)?;
        let checked = kind_of(&source).and_then(|kind| {
            match kind {
                FileKind::Adapter => engine::adapter::apply::check(&source).map(|_| ()),
                FileKind::Definition => Definition::from_source(&source)
                    .and_then(|d| d.choices_listed().map_err(|e| e.placed_in(&source))),
            }
            .map(|()| kind)
        });
        match checked {
            Err(error) => {
                eprintln!("{}: {error}", path.display());
                return Ok(ExitCode::FAILURE);
            }
            Ok(FileKind::Adapter) => adapters.push((path, source)),
            Ok(FileKind::Definition) => definitions.push((path, source)),
        }
    }
    let db = Database::open(&args.database).await?;
    let who = cli_user();
    let by = engine::store::journal::Actor::Engine(&who);
    let mut failed = false;
    let verb = |dry: bool, done: &'static str, would: &'static str| if dry { would } else { done };
    for (path, source) in &adapters {
        use engine::store::adapter::FileStored;
        match engine::adapter::apply::apply(&db.pool, source, by, args.dry_run).await {
            Ok((name, FileStored::Added { version } | FileStored::Changed { version })) => {
                println!(
                    "{}: {} adapter {name} v{version}; it sends nothing until `z29c adapter verify {name} --sandbox URL` passes",
                    path.display(),
                    verb(args.dry_run, "stored", "would store"),
                )
            }
            Ok((name, FileStored::Unchanged { version })) => println!(
                "{}: adapter {name} v{version} is applied already, unchanged",
                path.display()
            ),
            Err(error) => {
                eprintln!("{}: {error}", path.display());
                failed = true;
            }
        }
    }
    for (path, source) in &definitions {
        let applied = engine::definition::apply(
            &db.pool,
            source,
            by,
            engine::definition::ApplyOptions {
                dry_run: args.dry_run,
                allow_missing_adapters: args.allow_missing_adapters,
            },
        );
        match applied.await {
            Ok(Applied::Added { name, version }) => println!(
                "{}: {} definition {name} v{version}",
                path.display(),
                verb(args.dry_run, "added", "would add"),
            ),
            Ok(Applied::Unchanged { name, version }) => println!(
                "{}: definition {name} v{version} is applied already, unchanged",
                path.display()
            ),
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

/// Who applies files at the command line, as stored beside each version and in the audit
/// log: `cli:` and the login name the environment gives. Whoever runs `z29c` could set it;
/// what vouches for them is the database credential the command needed.
pub(crate) fn cli_user() -> String {
    match std::env::var("USER").or_else(|_| std::env::var("LOGNAME")) {
        Ok(user) if !user.is_empty() && !user.chars().any(char::is_control) => {
            format!("cli:{}", user.chars().take(64).collect::<String>())
        }
        _ => "cli".to_owned(),
    }
}

/// `z29c adapter list`.
pub(crate) async fn list_adapters(json: bool, database: &DatabaseArgs) -> anyhow::Result<()> {
    let db = Database::open(database).await?;
    let rows = engine::adapter::apply::registered(&db.pool).await?;
    db.close().await?;
    for a in rows {
        let trust = match (a.may_send(), &a.demoted_reason) {
            (true, Some(reason)) => format!("verified; since then {reason}"),
            (true, None) => format!(
                "verified{}",
                a.verified_against
                    .as_deref()
                    .map(|s| format!(" against {s}"))
                    .unwrap_or_default()
            ),
            (false, _) => "not verified: sends nothing".to_owned(),
        };
        if json {
            let verified: Vec<String> = a.verified.iter().map(|c| c.id()).collect();
            println!(
                "{}",
                json!({ "name": a.name, "base_url": a.base_url, "version": a.contract_version,
                        "kind": a.contract.kind().as_str(), "contract": a.contract,
                        "may_send": a.may_send(), "verified_claims": verified,
                        "from_file": a.source.is_some(), "verified_version": a.verified_version,
                        "verified_against": a.verified_against, "demoted": a.demoted_reason })
            );
        } else {
            println!(
                "{:<22} v{:<3} {:<34} {} — {trust}",
                a.name,
                a.contract_version,
                a.base_url,
                a.contract.capabilities_summary()
            );
        }
    }
    Ok(())
}

/// `z29c adapter verify NAME --sandbox URL`: one line per claim (every check with
/// `--verbose`), or one JSON object; an error (exit 1) when the version does not pass.
pub(crate) async fn verify_adapter(
    name: &str,
    sandbox: &str,
    verbose: bool,
    json: bool,
    database: &DatabaseArgs,
) -> anyhow::Result<()> {
    use engine::adapter::apply::Verified;
    let db = Database::open(database).await?;
    let verified = engine::adapter::apply::verify(&db.pool, name, sandbox).await;
    db.close().await?;
    let (passed, version, report, sends) = match verified? {
        Verified::Passed { version, report } => (true, version, report, true),
        Verified::Failed {
            version,
            report,
            sends,
        } => (false, version, report, sends),
    };
    if json {
        let claims = engine::adapter::apply::records(&report, sandbox);
        println!(
            "{}",
            json!({ "adapter": name, "version": version, "passed": passed, "against": sandbox,
                    "claims": claims.iter().map(|c| json!({
                        "claim": c.claim.id(), "label": c.claim.label(), "trust": c.trust,
                        "evidence": c.evidence, "checks": c.checks })).collect::<Vec<_>>() })
        );
    } else {
        println!("{}", report.summary());
        if verbose {
            println!("\nEvery check:\n{}", report.details());
        }
    }
    if passed {
        if !json {
            println!(
                "Version {version} of `{name}` passed verification against {sandbox}: it sends, and its verified claims count."
            );
        }
        Ok(())
    } else if sends {
        anyhow::bail!(
            "version {version} of `{name}` did not pass this verification ({}); it passed before and keeps sending, but what was refuted counts for nothing from now on",
            report.refusal()
        )
    } else {
        anyhow::bail!(
            "version {version} of `{name}` did not pass verification ({}); it sends nothing until a version passes",
            report.refusal()
        )
    }
}

/// `z29c adapter claims NAME`.
pub(crate) async fn list_claims(
    name: &str,
    json: bool,
    database: &DatabaseArgs,
) -> anyhow::Result<()> {
    let db = Database::open(database).await?;
    let claims = engine::store::adapter::claims(&db.pool, name).await;
    db.close().await?;
    for c in claims? {
        if json {
            println!(
                "{}",
                json!({ "claim": c.claim.id(), "label": c.claim.label(), "trust": c.trust,
                        "evidence": c.evidence, "against": c.against, "decided_at": c.decided_at,
                        "checks": c.checks })
            );
        } else {
            println!(
                "{:<24} {:<10} {}",
                c.claim.label(),
                c.trust.label(),
                c.evidence
            );
        }
    }
    Ok(())
}

/// `z29c definitions list` (and `history`).
pub(crate) async fn definitions(command: DefinitionsCommand) -> anyhow::Result<ExitCode> {
    let (json, database) = match command {
        DefinitionsCommand::List { json, database } => (json, database),
        DefinitionsCommand::History {
            name,
            json,
            database,
        } => return crate::history::definition(&name, json, &database).await,
    };
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
                    "step {} (external, adapter {adapter}, key {key}):\n  request, before the adapter shapes it: {}\n  its digest: {}\n  content digest (what the destination compares): {}",
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
