//! Command-line interface of `z29c`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use engine::embedded_pg::{Durability, EmbeddedPostgres};
use leptos::prelude::LeptosOptions;

use crate::database::{Database, DatabaseArgs};
use crate::http::{AppState, router};

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
    /// Apply pending database migrations and exit.
    Migrate(DatabaseArgs),
    /// Private PostgreSQL clusters for development and tests.
    #[command(subcommand)]
    Db(DbCommand),
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
                Command::Migrate(args) => {
                    Database::open(&args).await?.close().await?;
                    println!("migrations are up to date");
                    Ok(ExitCode::SUCCESS)
                }
                Command::Db(DbCommand::Exec { durable, command }) => {
                    db_exec(durable, command).await
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
    println!("Z29C console: http://{}", listener.local_addr()?);
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(crate::shutdown::signal())
        .await
        .context("serving HTTP");
    database.close().await?;
    served
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
