//! The engine bench's worker processes: `z29c bench engine-worker`, started by the bench as
//! children of its own binary, so the system measured has as many worker processes as a
//! deployment would, each with its own connections.
//!
//! A child connects, loads what it needs, prints `ready`, waits for a line on its standard input
//! (the bench's start signal, so no child starts before the others), runs its worker, and stops
//! on SIGTERM after its steps in flight have finished.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use engine::adapter::Adapter;
use engine::adapter::registry::Adapters;
use engine::domain::SideEffectContract;
use engine::worker::{Worker, WorkerConfig};
use sqlx::postgres::PgPoolOptions;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use super::instant::InstantDestination;

/// Settings of one bench worker process.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineWorkerArgs {
    /// The adapter the bench registered.
    #[arg(long)]
    pub adapter: String,
    /// The contract version it was registered under.
    #[arg(long)]
    pub contract_version: i32,
    /// The real destination's URL; without it the destination is in process.
    #[arg(long)]
    pub http: Option<String>,
    #[arg(long)]
    pub batch: i64,
    #[arg(long)]
    pub concurrency: usize,
    /// Names this process's worker.
    #[arg(long)]
    pub name: String,
}

/// The contract of the bench's adapter: idempotent, five-second deadline.
pub(super) fn bench_contract() -> SideEffectContract {
    engine::adapter::contracts::declared(engine::domain::ContractKind::Idempotent, 5_000, 0, false)
}

/// The adapters a bench worker calls: `name`, reaching `http` or the in-process destination.
pub(super) fn bench_adapters(name: &str, version: i32, http: Option<&str>) -> Adapters {
    let contract = bench_contract();
    let destination: Arc<dyn Adapter> = match http {
        Some(url) => Arc::new(engine::adapter::protocol::protocol_adapter(url, &contract)),
        None => Arc::new(InstantDestination { contract }),
    };
    let mut adapters = Adapters::default();
    adapters.insert(name.to_owned(), destination, version);
    adapters
}

/// The child's side: `z29c bench engine-worker`, on `DATABASE_URL`.
pub async fn engine_worker(args: EngineWorkerArgs) -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL").context("the bench passes DATABASE_URL")?;
    let size = u32::try_from(args.concurrency + 4).unwrap_or(24);
    let pool = PgPoolOptions::new()
        .max_connections(size)
        .min_connections(size)
        .connect(&url)
        .await?;
    let mut config = WorkerConfig::named(args.name);
    config.batch = args.batch;
    config.concurrency = args.concurrency;
    config.idle_poll = Duration::from_millis(5);
    config.invariant_interval = Duration::from_secs(3_600);
    let adapters = bench_adapters(&args.adapter, args.contract_version, args.http.as_deref());
    let worker = Worker::new(pool.clone(), config, adapters);
    println!("ready");
    // The start signal: a line on standard input.
    tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await??;
    engine::maintenance::run_worker(worker, crate::shutdown::signal()).await;
    pool.close().await;
    Ok(())
}

/// Worker processes started by the bench.
pub(super) struct Fleet {
    children: Vec<Child>,
}

impl Fleet {
    /// Starts `processes` children of this binary on `url` and waits until each is ready.
    pub(super) async fn start(
        processes: usize,
        url: &str,
        worker: &EngineWorkerArgs,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("finding this binary")?;
        let mut children = Vec::with_capacity(processes);
        for p in 0..processes {
            let mut command = Command::new(&exe);
            command
                .args(["bench", "engine-worker", "--adapter", &worker.adapter])
                .args(["--contract-version", &worker.contract_version.to_string()])
                .args(["--batch", &worker.batch.to_string()])
                .args(["--concurrency", &worker.concurrency.to_string()])
                .args(["--name", &format!("{}-{p}", worker.name)])
                .env("DATABASE_URL", url)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .kill_on_drop(true);
            if let Some(http) = &worker.http {
                command.args(["--http", http]);
            }
            let mut child = command.spawn().context("starting a bench worker")?;
            let stdout = child.stdout.take().context("the worker's output")?;
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).await?;
            anyhow::ensure!(
                line.trim() == "ready",
                "a bench worker did not start: {line:?}"
            );
            children.push(child);
        }
        Ok(Self { children })
    }

    /// Lets every worker start claiming.
    pub(super) async fn go(&mut self) -> anyhow::Result<()> {
        for child in &mut self.children {
            let stdin = child.stdin.as_mut().context("the worker's input")?;
            stdin.write_all(b"go\n").await?;
            stdin.flush().await?;
        }
        Ok(())
    }

    /// Stops every worker with SIGTERM and waits for each to exit cleanly.
    pub(super) async fn stop(mut self) -> anyhow::Result<()> {
        for child in &self.children {
            if let Some(pid) = child.id() {
                let pid = nix::unistd::Pid::from_raw(i32::try_from(pid)?);
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)?;
            }
        }
        for child in &mut self.children {
            let status = child.wait().await?;
            anyhow::ensure!(status.success(), "a bench worker exited with {status}");
        }
        Ok(())
    }
}
