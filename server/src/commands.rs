//! What each `z29c` command does, once its arguments are parsed: the long-running ones start in
//! `startup`, the lab's (with `--features lab`) in `lab`; the operator commands (tokens, users, adapters,
//! checks, migrations, private clusters) run here to completion.

use std::process::ExitCode;

use anyhow::Context;
use engine::embedded_pg::{Durability, EmbeddedPostgres};

use crate::cli::{AdapterCommand, CheckArgs, Cli, Command, DbCommand, TokenCommand, UserCommand};
#[cfg(feature = "lab")]
use crate::cli::{BenchCommand, ScenarioCommand};
use crate::database::Database;
use crate::demo;
#[cfg(feature = "lab")]
use crate::lab::{bench, scenario};
use crate::startup::{serve, worker};

impl Cli {
    /// Runs the chosen command to completion.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        let tracing = crate::telemetry::init(&self.telemetry)?;
        engine::adapter::policy::set(self.policy.for_command(&self.command)?);
        let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
        let ran = runtime.block_on(async move {
            match self.command {
                Command::Serve(args) => serve(args).await.map(|()| ExitCode::SUCCESS),
                Command::Worker(args) => worker(args).await.map(|()| ExitCode::SUCCESS),
                Command::Destinations(args) => demo::serve_destination(
                    args.kind,
                    args.addr,
                    std::time::Duration::from_millis(args.visibility_window_ms),
                    args.basic,
                    &args.database,
                )
                .await
                .map(|()| ExitCode::SUCCESS),
                Command::Token(command) => token(command).await.map(|()| ExitCode::SUCCESS),
                Command::Adapter(command) => adapter(command).await,
                Command::Apply(args) => crate::files::apply(args).await,
                Command::Definitions(command) => crate::files::definitions(command).await,
                Command::Render(args) => crate::files::render(args).await,
                Command::User(command) => user(command).await.map(|()| ExitCode::SUCCESS),
                Command::Check(args) => check(args).await,
                Command::Archive(command) => crate::archive::run(command).await,
                Command::Openapi => {
                    let document = crate::http::api::openapi_document();
                    println!("{}", serde_json::to_string_pretty(&document)?);
                    Ok(ExitCode::SUCCESS)
                }
                Command::Migrate(args) => {
                    Database::open(&args).await?.close().await?;
                    println!("migrations are up to date");
                    Ok(ExitCode::SUCCESS)
                }
                Command::Db(DbCommand::Exec { durable, command }) => {
                    db_exec(durable, command).await
                }
                #[cfg(feature = "lab")]
                Command::Scenario(ScenarioCommand::Matrix(args)) => scenario::matrix(args).await,
                #[cfg(feature = "lab")]
                Command::Scenario(ScenarioCommand::Soak(args)) => scenario::soak(args).await,
                #[cfg(feature = "lab")]
                Command::Bench(command) => run_bench(command).await.map(|()| ExitCode::SUCCESS),
                Command::Ops(command) => crate::ops::run(command).await,
                Command::Completions { shell } => {
                    crate::ops::completions(shell, &mut std::io::stdout());
                    Ok(ExitCode::SUCCESS)
                }
                Command::RebuildProjections(args) => {
                    let db = Database::open(&args).await?;
                    let rebuilt = engine::outbox::projections::rebuild(&db.pool).await;
                    db.close().await?;
                    println!("rebuilt the projections of {} workflow(s)", rebuilt?);
                    Ok(ExitCode::SUCCESS)
                }
            }
        });
        // The last spans reach the collector before the process ends.
        drop(runtime);
        if let Some(tracing) = tracing {
            tracing.shutdown();
        }
        ran
    }
}

/// `z29c bench …` (a build with `--features lab`).
#[cfg(feature = "lab")]
async fn run_bench(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Engine(args) => bench::engine(args).await,
        BenchCommand::EngineWorker(args) => bench::engine_worker(args).await,
        BenchCommand::Console(args) => bench::console(args).await,
        BenchCommand::Retention(args) => bench::retention(args).await,
    }
}

async fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let db = Database::open(&args.database).await?;
    let mut keys_apart = true;
    if args.before_resume {
        // Re-basing the outbox rewrites events, which only the schema's owner may do.
        let owner = db.owner().await?;
        keys_apart = reconcile_archive(&owner, args.archive_dir.as_deref()).await?;
        let resume = engine::watch::invariants::prepare_resume(&owner).await?;
        println!(
            "before resume: {} external step(s) caught unfinished go to recovery (query, same-key \
             replay or review), {} waiting for dependencies will start the same way, {} pure \
             step(s) are ready again",
            resume.to_recovery, resume.marked, resume.to_ready
        );
        if resume.rebased_events > 0 {
            println!(
                "before resume: {} outbox event(s) were ahead of this cluster's transaction ids \
                 (restored from another cluster) and were re-based, every reader's place kept",
                resume.rebased_events
            );
        }
    }
    let violations = engine::watch::invariants::check(&db.pool).await?;
    let seen = engine::watch::invariants::seen(&db.pool, &violations).await?;
    let orphans = engine::watch::invariants::orphans(&db.pool).await?;
    db.close().await?;
    for kind in engine::watch::invariants::KINDS {
        let found: Vec<_> = violations.iter().filter(|v| v.kind == kind).collect();
        let known = found.iter().filter(|v| seen.contains(v)).count();
        println!(
            "{:<45} {}",
            kind,
            match (found.len(), known) {
                (0, _) => "ok".to_owned(),
                (n, 0) => format!("{n} violation(s)"),
                (n, k) if k == n => format!("{n} violation(s), each recorded in an incident"),
                (n, k) => format!("{n} violation(s), {k} recorded in an incident"),
            }
        );
        for v in found {
            let note = if seen.contains(v) { "  (incident)" } else { "" };
            println!("    {}  {}{note}", v.subject, v.evidence);
        }
    }
    println!(
        "{:<45} {}",
        "references_without_their_row",
        if orphans.is_empty() {
            "ok".to_owned()
        } else {
            format!("{} reference(s) broken", orphans.len())
        }
    );
    for o in &orphans {
        println!("    {}  {} row(s), e.g. {}", o.reference, o.rows, o.example);
    }
    // What an incident already records was detected and is in a person's hands: only what
    // nobody has seen fails the check, so it can gate a deploy or a restore.
    Ok(
        if violations.len() == seen.len() && orphans.is_empty() && keys_apart {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}

/// After a restore: the tombstones of what the archive at `dir` holds and the database lacks,
/// written again (docs/DESIGN.md §21, "After a restore"). False when an archived workflow's
/// creation key is held by a workflow started since: that fails the check.
async fn reconcile_archive(
    owner: &sqlx::PgPool,
    dir: Option<&std::path::Path>,
) -> anyhow::Result<bool> {
    let Some(dir) = dir else {
        println!(
            "before resume: no archive given (--archive-dir, Z29C_ARCHIVE_DIR); a deployment that \
             archives must give it, or workflows archived after the backup lose their keys"
        );
        return Ok(true);
    };
    anyhow::ensure!(dir.is_dir(), "no archive at {}", dir.display());
    let archive = engine::archive::ArchiveDir::at(dir);
    let done = engine::archive::reconcile(owner, &archive)
        .await
        .with_context(|| format!("reconciling the archive at {}", dir.display()))?;
    println!(
        "before resume: {} archive member(s) read since the database's newest tombstone; {} \
         workflow(s) archived after the backup have their tombstones again, {} the backup holds \
         will be archived again (their copies in the archive are shown beside them until then)",
        done.members,
        done.restored.len(),
        done.hot_again.len()
    );
    for id in &done.key_taken {
        println!(
            "before resume: archived workflow {id} has its creation key held by a workflow \
             started since the restore: two intents under one key, look at both"
        );
    }
    Ok(done.key_taken.is_empty())
}

/// Who the audit log names for what is done at the command line: whoever can run `z29c`
/// against the database, which the log cannot tell apart.
const CLI: engine::store::journal::Actor<'static> = engine::store::journal::Actor::Engine("cli");

/// `z29c user …`: each change, and each listing, is audited as done from the command line.
async fn user(command: UserCommand) -> anyhow::Result<()> {
    use engine::operators;
    match command {
        UserCommand::Add {
            name,
            role,
            database,
        } => {
            let db = Database::open(&database).await?;
            let added = operators::add(&db.pool, &name, role).await;
            db.close().await?;
            println!("{}", added?);
            eprintln!(
                "operator `{name}` ({}) created; the password is shown only now",
                role.as_str()
            );
        }
        UserCommand::List { output, database } => {
            let db = Database::open(&database).await?;
            let listed = operators::list(&db.pool, CLI).await;
            db.close().await?;
            crate::ops::listing::users(&listed?, output.json, &mut std::io::stdout())?;
        }
        UserCommand::Failures {
            limit,
            output,
            database,
        } => {
            let db = Database::open(&database).await?;
            let failures = engine::store::sign_in::failures(&db.pool, limit.clamp(1, 10_000)).await;
            db.close().await?;
            crate::ops::listing::failures(&failures?, output.json, &mut std::io::stdout())?;
        }
        UserCommand::Disable { name, database } => {
            let db = Database::open(&database).await?;
            let done = operators::disable(&db.pool, &name, CLI).await;
            db.close().await?;
            done?;
            println!("operator `{name}` disabled; their open sessions end on their next request");
        }
        UserCommand::Enable { name, database } => {
            let db = Database::open(&database).await?;
            let done = operators::enable(&db.pool, &name, CLI).await;
            db.close().await?;
            done?;
            println!("operator `{name}` enabled");
        }
        UserCommand::SetRole {
            name,
            role,
            database,
        } => {
            let db = Database::open(&database).await?;
            let done = operators::set_role(&db.pool, &name, role, CLI).await;
            db.close().await?;
            let previous = done?;
            println!(
                "operator `{name}` is now {} (was {}), from their next request",
                role.as_str(),
                previous.as_str()
            );
        }
        UserCommand::ResetPassword { name, database } => {
            let db = Database::open(&database).await?;
            let done = operators::reset_password(&db.pool, &name, CLI).await;
            db.close().await?;
            println!("{}", done?);
            eprintln!(
                "operator `{name}` has a new password; it is shown only now, and their open \
                 sessions end on their next request"
            );
        }
    }
    Ok(())
}

/// `z29c token …`: creating and revoking are audited as done from the command line.
async fn token(command: TokenCommand) -> anyhow::Result<()> {
    use engine::store::token::{self, NewToken};
    match command {
        TokenCommand::Create {
            name,
            role,
            creation_key_prefix,
            configure,
            adapters,
            on_behalf_of,
            database,
        } => {
            let db = Database::open(&database).await?;
            let new = NewToken {
                name: &name,
                role,
                creation_key_prefix: creation_key_prefix.as_deref(),
                may_configure: configure,
                adapters: adapters.as_deref(),
                on_behalf_of: on_behalf_of.as_deref(),
            };
            let created = token::create(&db.pool, &new, CLI).await;
            db.close().await?;
            println!("{}", created?);
            let mut scope = match &creation_key_prefix {
                Some(prefix) => format!("workflows whose creation key starts with `{prefix}`"),
                None => "every workflow".to_owned(),
            };
            if let Some(adapters) = &adapters {
                scope.push_str(&format!(" calling only {}", adapters.join(", ")));
            }
            if configure {
                scope.push_str(", and configuration");
            }
            eprintln!(
                "token `{name}` ({}, {scope}) created; it is shown only now: send it as `Authorization: Bearer <token>`",
                role.as_str()
            );
        }
        TokenCommand::List { output, database } => {
            let db = Database::open(&database).await?;
            let tokens = token::list(&db.pool).await;
            db.close().await?;
            crate::ops::listing::tokens(&tokens?, output.json, &mut std::io::stdout())?;
        }
        TokenCommand::Revoke { name, database } => {
            let db = Database::open(&database).await?;
            let revoked = token::revoke(&db.pool, &name, CLI).await;
            db.close().await?;
            revoked?;
            println!("token `{name}` revoked: its next request is refused");
        }
    }
    Ok(())
}

async fn adapter(command: AdapterCommand) -> anyhow::Result<ExitCode> {
    match command {
        AdapterCommand::Add {
            name,
            url,
            contract,
            deadline_ms,
            visibility_window_ms,
            review_unknown,
            database,
        } => {
            let kind = engine::domain::ContractKind::parse(&contract).with_context(|| {
                format!("`{contract}` is not a contract: use idempotent, queryable or opaque")
            })?;
            let contract = engine::adapter::contracts::declared(
                kind,
                deadline_ms,
                visibility_window_ms,
                review_unknown,
            );
            let db = Database::open(&database).await?;
            let added = engine::adapter::apply::add_protocol(
                &db.pool,
                &name,
                &url,
                &contract,
                engine::store::journal::Actor::Engine(&crate::files::cli_user()),
            )
            .await;
            db.close().await?;
            let (version, report) = added.with_context(|| format!("`{name}` not registered"))?;
            println!(
                "adapter `{name}` passed verification and is registered at {url} (version {version}):\n{}",
                report.summary()
            );
        }
        AdapterCommand::List { json, database } => {
            crate::files::list_adapters(json, &database).await?
        }
        AdapterCommand::Verify {
            name,
            sandbox,
            verbose,
            json,
            database,
        } => crate::files::verify_adapter(&name, &sandbox, verbose, json, &database).await?,
        AdapterCommand::Claims {
            name,
            json,
            database,
        } => crate::files::list_claims(&name, json, &database).await?,
        AdapterCommand::History {
            name,
            json,
            database,
        } => return crate::history::adapter(&name, json, &database).await,
    }
    Ok(ExitCode::SUCCESS)
}

async fn db_exec(durable: bool, command: Vec<String>) -> anyhow::Result<ExitCode> {
    let dir = tempfile::Builder::new()
        .prefix("z29c-db-")
        .tempdir()
        .context("creating a directory for the private cluster")?;
    // The cluster may run as another user (when we are root); it must reach its directory. The
    // directory is this command's own; under a TMPDIR closed to that user the cluster is placed
    // under /var/lib/z29c/clusters instead (engine::embedded_pg::place), and removed below.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let durability = if durable {
        Durability::Durable
    } else {
        Durability::Throwaway
    };
    let cluster = EmbeddedPostgres::start(dir.path().join("pg"), durability).await?;
    let url = cluster.ensure_database("z29c").await?;
    eprintln!("z29c db exec: private cluster on port {}", cluster.port());
    let (program, args) = command.split_first().context("no command given")?;
    // Ctrl-C reaches the child too; this process must outlive it to stop the cluster.
    let _interrupts = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let status = tokio::process::Command::new(program)
        .args(args)
        .env("DATABASE_URL", &url)
        .status()
        .await
        .with_context(|| format!("running {program}"));
    cluster.stop_and_remove().await?;
    let code = status?.code().unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
