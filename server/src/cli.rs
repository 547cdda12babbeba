//! Command-line interface of `z29c`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use engine::embedded_pg::{Durability, EmbeddedPostgres};
use leptos::prelude::LeptosOptions;

use crate::database::{Database, DatabaseArgs};
use crate::http::router;
use crate::state::AppState;

/// Z29C: durable workflows whose side effects cross a boundary no transaction covers.
#[derive(Debug, Parser)]
#[command(name = "z29c", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the recovery console and API.
    Serve(ServeArgs),
    /// Run one synthetic destination service (its own database; a private cluster by default).
    Destinations(DestinationArgs),
    /// Run workers only (many processes may share one database).
    Worker(WorkerArgs),
    /// Apply pending database migrations and exit.
    Migrate(DatabaseArgs),
    /// Check the semantic invariants; exits 1 when any is violated.
    Check(CheckArgs),
    /// API bearer tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Console operators.
    #[command(subcommand)]
    User(UserCommand),
    /// Adapters Z29C may call.
    #[command(subcommand)]
    Adapter(AdapterCommand),
    /// Private PostgreSQL clusters for development and tests.
    #[command(subcommand)]
    Db(DbCommand),
    /// Drop every projection (status, metrics, notification revisions) and rebuild it from
    /// durable state.
    RebuildProjections(DatabaseArgs),
    /// Measure throughput and page latency on this machine.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Kill workers between commits and judge recovery against the destinations' ledgers
    /// (needs a build with `--features failpoints`).
    #[command(subcommand)]
    Scenario(ScenarioCommand),
}

#[derive(Debug, Subcommand)]
enum ScenarioCommand {
    /// Every fault point × every destination kind.
    Matrix(crate::scenario::MatrixArgs),
    /// Many workflows, several worker processes, random SIGKILLs; reproducible from a seed.
    Soak(crate::scenario::SoakArgs),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Full-protocol steps per second, as a ratio to single-row UPDATE transactions per second.
    Engine(crate::bench::EngineBenchArgs),
    /// Console page latency at 10k, 100k and 1M workflows, and the front-end's weight.
    Console(crate::bench::ConsoleBenchArgs),
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Address the console listens on.
    #[arg(long, env = "Z29C_ADDR", default_value = "127.0.0.1:3000")]
    addr: SocketAddr,
    /// Directory holding the built console assets (`pkg/`), as cargo-leptos writes it.
    #[arg(long, env = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    site_root: PathBuf,
    /// Serve only: run no workers in this process.
    #[arg(long)]
    no_workers: bool,
    /// Also start the three demo destinations and seed demo workflows (what `make run` does).
    #[arg(long)]
    demo: bool,
    /// Where the demo destinations keep their private clusters.
    #[arg(long, env = "Z29C_DEMO_DATA", default_value = ".z29c/destinations")]
    demo_data_dir: PathBuf,
    #[command(flatten)]
    workers: WorkerTuning,
    #[command(flatten)]
    observer: ObserverArgs,
}

/// The outbox publisher, alerts and notifications every serving process runs.
#[derive(Debug, Clone, clap::Args)]
struct ObserverArgs {
    /// POST alerts (and notification candidates) here, each with its event id as
    /// `Idempotency-Key`.
    #[arg(long, env = "Z29C_WEBHOOK")]
    webhook: Option<String>,
    /// Raise an alert for an outcome unknown longer than this many seconds.
    #[arg(long, env = "Z29C_ALERT_UNKNOWN_AGE_SECS", default_value_t = 900)]
    alert_unknown_age_secs: u64,
    /// How often alert rules are evaluated and webhooks sent, in seconds.
    #[arg(long, env = "Z29C_OBSERVE_EVERY_SECS", default_value_t = 10)]
    observe_every_secs: u64,
}

/// Publishes the outbox (woken by NOTIFY), evaluates the alert rules, and sends webhooks and
/// notifications, until `stopped`.
fn spawn_observer(
    pool: &sqlx::PgPool,
    args: &ObserverArgs,
    stopped: tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let publisher = engine::outbox::Publisher::standard(pool.clone(), args.webhook.clone());
    let mut publisher_stop = stopped.clone();
    let publishing = tokio::spawn(publisher.run(Duration::from_secs(1), async move {
        let _ = publisher_stop.wait_for(|stop| *stop).await;
    }));
    let (pool, args, mut stopped) = (pool.clone(), args.clone(), stopped);
    let observing = tokio::spawn(async move {
        let rules = engine::alerts::AlertRules {
            max_unknown_age: Duration::from_secs(args.alert_unknown_age_secs),
        };
        let client = reqwest::Client::new();
        loop {
            if let Err(error) = engine::alerts::evaluate(&pool, &rules).await {
                tracing::warn!(%error, "alert evaluation failed");
            }
            if let Some(url) = &args.webhook {
                if let Err(error) = engine::alerts::deliver_webhooks(&pool, &client, url).await {
                    tracing::warn!(%error, "the webhook queue could not be sent; it is tried again");
                }
                let send = |id: i64, workflow: uuid::Uuid, sentence: String| {
                    let request = client
                        .post(url)
                        .header("Idempotency-Key", format!("notification-{id}"))
                        .json(&serde_json::json!({ "workflow": workflow, "status": sentence }));
                    async move { request.send().await.is_ok_and(|r| r.status().is_success()) }
                };
                if let Err(error) = engine::projections::dispatch_notifications(&pool, send).await {
                    tracing::warn!(%error, "notification dispatch failed");
                }
            }
            tokio::select! {
                _ = stopped.wait_for(|stop| *stop) => return,
                () = tokio::time::sleep(Duration::from_secs(args.observe_every_secs.max(1))) => {}
            }
        }
    });
    vec![publishing, observing]
}

#[derive(Debug, clap::Args)]
struct DestinationArgs {
    /// idempotent, queryable or opaque (see destinations/PROTOCOL.md).
    #[arg(long)]
    kind: destinations::Kind,
    /// Where the service listens.
    #[arg(long, default_value = "127.0.0.1:3101")]
    addr: SocketAddr,
    /// How long the status index lags acceptance (queryable kind).
    #[arg(long, default_value_t = 1_500)]
    visibility_window_ms: u64,
    /// The destination's own database: DATABASE_URL, or a private cluster in --pg-data-dir.
    #[command(flatten)]
    database: DatabaseArgs,
}

#[derive(Debug, clap::Args)]
struct WorkerArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    workers: WorkerTuning,
}

#[derive(Debug, Clone, clap::Args)]
struct WorkerTuning {
    /// Name recorded in leases and attempts (default: host and process id).
    #[arg(long, env = "Z29C_WORKER_NAME")]
    worker_name: Option<String>,
    /// Steps in flight at once in this process.
    #[arg(long, env = "Z29C_WORKER_CONCURRENCY", default_value_t = 16)]
    concurrency: usize,
    /// Steps claimed per transaction.
    #[arg(long, env = "Z29C_WORKER_BATCH", default_value_t = 32)]
    batch: i64,
    /// Lease length in seconds (renewed while a call is in flight).
    #[arg(long, env = "Z29C_LEASE_SECS", default_value_t = 30)]
    lease_secs: u64,
    /// Run every adapter's contract suite (real calls) before starting, refusing false claims.
    /// `z29c adapter add` always runs it; this re-checks destinations that may have changed.
    #[arg(long)]
    verify_adapters: bool,
}

impl WorkerTuning {
    fn config(&self) -> engine::worker::WorkerConfig {
        let name = self.worker_name.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        });
        let mut config = engine::worker::WorkerConfig::named(name);
        config.concurrency = self.concurrency.max(1);
        config.batch = self.batch.max(1);
        config.lease = std::time::Duration::from_secs(self.lease_secs.max(1));
        config
    }
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// After a restore, before workers resume: hand every step caught mid-call to recovery.
    #[arg(long)]
    before_resume: bool,
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Create an operator; the password is printed once.
    Add {
        /// Sign-in name (lowercase letters, digits, `.`, `_`, `-`).
        name: String,
        /// viewer (reads), operator (checks, same-key retries, evidence) or approver (all).
        #[arg(long)]
        role: engine::domain::Role,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create a bearer token for an API client; the token is printed once.
    Create {
        /// Who the token is for (recorded in the audit log).
        name: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

#[derive(Debug, Subcommand)]
enum AdapterCommand {
    /// Register (or update) an HTTP adapter speaking the destination protocol.
    Add {
        /// The name workflows use in their input.
        name: String,
        /// Base URL of the destination service.
        #[arg(long)]
        url: String,
        /// The contract it declares: idempotent, queryable or opaque.
        #[arg(long)]
        contract: String,
        /// How long a call may take before its outcome is unknown.
        #[arg(long, default_value_t = 2_000)]
        deadline_ms: u64,
        /// For queryable: how long a "not found" may still turn into "found".
        #[arg(long, default_value_t = 1_500)]
        visibility_window_ms: u64,
        /// Ask a person to review every unknown outcome, whatever the capabilities.
        #[arg(long)]
        review_unknown: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List registered adapters and their contracts.
    List(DatabaseArgs),
}

#[derive(Debug, Subcommand)]
enum DbCommand {
    /// Run COMMAND with DATABASE_URL pointing at a fresh private cluster, removed afterwards.
    Exec {
        /// Keep PostgreSQL's durable defaults (fsync on); the default trades them for speed.
        #[arg(long)]
        durable: bool,
        /// The command and its arguments.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
}

impl Cli {
    /// Runs the chosen command to completion.
    pub fn run(self) -> anyhow::Result<ExitCode> {
        init_tracing();
        let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
        runtime.block_on(async move {
            match self.command {
                Command::Serve(args) => serve(args).await.map(|()| ExitCode::SUCCESS),
                Command::Worker(args) => worker(args).await.map(|()| ExitCode::SUCCESS),
                Command::Destinations(args) => crate::demo::serve_destination(
                    args.kind,
                    args.addr,
                    std::time::Duration::from_millis(args.visibility_window_ms),
                    &args.database,
                )
                .await
                .map(|()| ExitCode::SUCCESS),
                Command::Token(TokenCommand::Create { name, database }) => {
                    let db = Database::open(&database).await?;
                    let secret = engine::store::token::create(&db.pool, &name).await?;
                    db.close().await?;
                    println!("{secret}");
                    eprintln!("token `{name}` created; it is shown only now: send it as `Authorization: Bearer <token>`");
                    Ok(ExitCode::SUCCESS)
                }
                Command::Adapter(command) => adapter(command).await.map(|()| ExitCode::SUCCESS),
                Command::User(UserCommand::Add {
                    name,
                    role,
                    database,
                }) => {
                    let db = Database::open(&database).await?;
                    let added = engine::operators::add(&db.pool, &name, role).await;
                    db.close().await?;
                    let password = added?;
                    println!("{password}");
                    eprintln!(
                        "operator `{name}` ({role:?}) created; the password is shown only now"
                    );
                    Ok(ExitCode::SUCCESS)
                }
                Command::Check(args) => check(args).await,
                Command::Migrate(args) => {
                    Database::open(&args).await?.close().await?;
                    println!("migrations are up to date");
                    Ok(ExitCode::SUCCESS)
                }
                Command::Db(DbCommand::Exec { durable, command }) => {
                    db_exec(durable, command).await
                }
                Command::Scenario(ScenarioCommand::Matrix(args)) => {
                    crate::scenario::matrix(args).await
                }
                Command::Scenario(ScenarioCommand::Soak(args)) => crate::scenario::soak(args).await,
                Command::Bench(BenchCommand::Engine(args)) => {
                    crate::bench::engine(args).await?;
                    Ok(ExitCode::SUCCESS)
                }
                Command::Bench(BenchCommand::Console(args)) => {
                    crate::bench::console(args).await?;
                    Ok(ExitCode::SUCCESS)
                }
                Command::RebuildProjections(args) => {
                    let db = Database::open(&args).await?;
                    let rebuilt = engine::projections::rebuild(&db.pool).await;
                    db.close().await?;
                    println!("rebuilt the projections of {} workflow(s)", rebuilt?);
                    Ok(ExitCode::SUCCESS)
                }
            }
        })
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,sqlx=warn,tower_sessions=warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let database = Database::open(&args.database).await?;
    let leptos_options = LeptosOptions::builder()
        .output_name("z29c")
        .site_root(args.site_root.to_string_lossy().into_owned())
        .site_pkg_dir("pkg")
        .site_addr(args.addr)
        .build();
    let app = router(AppState {
        pool: database.pool.clone(),
        leptos_options,
    });
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("listening on {}", args.addr))?;
    let demo = if args.demo {
        let demo = crate::demo::Demo::start(&database.pool, &args.demo_data_dir).await?;
        let seeded = crate::demo::seed(&database.pool).await?;
        println!("demo: three destinations started; {seeded} new demo workflow(s)");
        match engine::operators::add(&database.pool, "demo", engine::domain::Role::Approver).await {
            Ok(password) => {
                println!("demo: sign in as `demo` with password {password} (shown once)")
            }
            Err(engine::operators::OperatorError::Exists(_)) => println!(
                "demo: the `demo` approver exists (its password was printed on the first start); \
                 add another with `z29c user add NAME --role approver`"
            ),
            Err(error) => return Err(error.into()),
        }
        Some(demo)
    } else {
        None
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let expired_sessions = tokio::spawn(
        tower_sessions::session_store::ExpiredDeletion::continuously_delete_expired(
            tower_sessions_sqlx_store::PostgresStore::new(database.pool.clone()),
            tokio::time::Duration::from_secs(60 * 10),
        ),
    );
    let workers = if args.no_workers {
        None
    } else {
        Some(spawn_worker(&database, &args.workers, stopped.clone()).await?)
    };
    let observers = spawn_observer(&database.pool, &args.observer, stopped.clone());
    let resumed = engine::bulk::resume_all(&database.pool).await?;
    if resumed > 0 {
        tracing::info!(runs = resumed, "resuming unfinished bulk recovery runs");
    }
    println!("Z29C console: http://{}", listener.local_addr()?);
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            crate::shutdown::signal().await;
            let _ = stop.send(true);
        })
        .await
        .context("serving HTTP");
    if let Some(workers) = workers {
        workers.await.context("the worker task panicked")?;
    }
    for observer in observers {
        observer.await.context("an observer task panicked")?;
    }
    expired_sessions.abort();
    if let Some(demo) = demo {
        demo.stop().await;
    }
    database.close().await?;
    served
}

async fn spawn_worker(
    database: &Database,
    tuning: &WorkerTuning,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let adapters = if tuning.verify_adapters {
        engine::worker::Adapters::load_verified(&database.pool).await?
    } else {
        engine::worker::Adapters::load(&database.pool).await?
    };
    let config = tuning.config();
    tracing::info!(worker = %config.name, concurrency = config.concurrency, "starting workers");
    let worker = engine::worker::Worker::new(database.pool.clone(), config, adapters);
    Ok(tokio::spawn(worker.run(async move {
        let _ = stopped.wait_for(|stop| *stop).await;
    })))
}

async fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    let database = Database::open(&args.database).await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let handle = spawn_worker(&database, &args.workers, stopped).await?;
    crate::shutdown::signal().await;
    let _ = stop.send(true);
    handle.await.context("the worker task panicked")?;
    database.close().await
}

async fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let db = Database::open(&args.database).await?;
    if args.before_resume {
        let resume = engine::invariants::prepare_resume(&db.pool).await?;
        println!(
            "before resume: {} external step(s) caught unfinished go to recovery (query, same-key \
             replay or review), {} waiting for dependencies will start the same way, {} pure \
             step(s) are ready again",
            resume.to_recovery, resume.marked, resume.to_ready
        );
    }
    let violations = engine::invariants::check(&db.pool).await?;
    db.close().await?;
    for kind in engine::invariants::KINDS {
        let found: Vec<_> = violations.iter().filter(|v| v.kind == kind).collect();
        println!(
            "{:<45} {}",
            kind,
            if found.is_empty() {
                "ok".to_owned()
            } else {
                format!("{} violation(s)", found.len())
            }
        );
        for v in found {
            println!("    {}  {}", v.subject, v.evidence);
        }
    }
    Ok(if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn adapter(command: AdapterCommand) -> anyhow::Result<()> {
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
            let contract = engine::contracts::declared(
                &contract,
                deadline_ms,
                visibility_window_ms,
                review_unknown,
            )
            .with_context(|| {
                format!("`{contract}` is not a contract: use idempotent, queryable or opaque")
            })?;
            let report = engine::contract_suite::verify(
                &name,
                &engine::adapter::HttpAdapter::new(&url, contract.clone()),
            )
            .await;
            anyhow::ensure!(report.passed(), "{}; not registered", report.summary());
            let db = Database::open(&database).await?;
            let version = engine::store::adapter::upsert(&db.pool, &name, &url, &contract).await?;
            db.close().await?;
            println!(
                "adapter `{name}` passed its contract suite and is registered at {url} (contract version {version}): {}",
                contract.capabilities_summary()
            );
        }
        AdapterCommand::List(database) => {
            let db = Database::open(&database).await?;
            for a in engine::store::adapter::all(&db.pool).await? {
                println!(
                    "{}\t{}\tv{}\t{}",
                    a.name,
                    a.base_url,
                    a.contract_version,
                    a.contract.capabilities_summary()
                );
            }
            db.close().await?;
        }
    }
    Ok(())
}

async fn db_exec(durable: bool, command: Vec<String>) -> anyhow::Result<ExitCode> {
    let dir = tempfile::Builder::new()
        .prefix("z29c-db-")
        .tempdir()
        .context("creating a directory for the private cluster")?;
    // The cluster may run as another user (when we are root); it must reach its directory.
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
    cluster.stop().await?;
    let code = status?.code().unwrap_or(1);
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}
