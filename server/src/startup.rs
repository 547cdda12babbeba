//! Start-up of the long-running commands: `z29c serve` (console, workers, maintenance
//! services and the optional demo) and `z29c worker`, and their shutdown in order on SIGINT or SIGTERM.

use std::time::Duration;

use anyhow::Context;
use engine::maintenance::{OutboxPublisher, Service, Services};

use crate::cli::{ObserverArgs, ServeArgs, WorkerArgs, WorkerTuning};
use crate::database::Database;
use crate::http::proxy::Exposure;
use crate::http::router_for;
use crate::state::AppState;

/// `z29c serve`: the console and API, with workers (unless `--no-workers`), observers and the
/// optional demo, until SIGINT or SIGTERM; then everything stops in order.
pub(crate) async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    refuse_demo_on_a_named_database(&args)?;
    let database = Database::open(&args.database).await?;
    let leptos_options = crate::http::assets::options(&args.site_root, args.addr);
    let exposure = if args.behind_tls_proxy {
        Exposure::BehindTlsProxy
    } else {
        Exposure::Direct
    };
    let archive =
        engine::archive::ArchiveDir::open(&args.retention.archive_dir).with_context(|| {
            format!(
                "opening the archive at {}",
                args.retention.archive_dir.display()
            )
        })?;
    let state =
        AppState::beside_engine(&database.pool, args.db_console_connections, leptos_options)
            .with_archive(archive.clone());
    let console = state.pool.clone();
    let app = router_for(state, exposure);
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("listening on {}", args.addr))?;
    let demo = if args.demo {
        Some(start_demo(&database.pool, &args).await?)
    } else {
        None
    };
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let workers = if args.no_workers {
        None
    } else {
        Some(spawn_worker(&database, &args.workers, stopped.clone()).await?)
    };
    let mut services = serving(&database.pool, &args.observer)?;
    services.push(Box::new(engine::archive::service(
        engine::archive::Archiver::new(database.pool.clone(), archive, args.retention.policy()),
        Duration::from_secs(args.retention.archive_every_secs),
    )));
    let services = Services::start(services);
    let resumed = engine::recovery::bulk::resume_all(&database.pool).await?;
    if resumed > 0 {
        tracing::info!(runs = resumed, "resuming unfinished bulk recovery runs");
    }
    println!("Z29C console: http://{}", listener.local_addr()?);
    // The peer address reaches sign-in throttling (replaced by the proxy's word behind one).
    let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
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
    services.stop().await;
    if let Some(demo) = demo {
        demo.stop().await;
    }
    console.close().await;
    database.close().await?;
    served
}

/// Starts the demo destinations, seeds the demo workflows and creates the `demo` approver
/// (printing its password on the first start only).
async fn start_demo(pool: &sqlx::PgPool, args: &ServeArgs) -> anyhow::Result<crate::demo::Demo> {
    let demo = crate::demo::Demo::start(pool, &args.demo_data_dir).await?;
    let seeded = crate::demo::seed(pool).await?;
    println!("demo: five destinations started; {seeded} new demo workflow(s)");
    match engine::operators::add(pool, "demo", engine::domain::Role::Approver).await {
        Ok(password) => println!("demo: sign in as `demo` with password {password} (shown once)"),
        Err(engine::operators::OperatorError::Exists(_)) => println!(
            "demo: the `demo` approver exists (its password was printed on the first start); \
             add another with `z29c user add NAME --role approver`"
        ),
        Err(error) => return Err(error.into()),
    }
    Ok(demo)
}

/// The demo adds a `demo` approver and demo workflows: only to the private cluster, never to a
/// database someone named with DATABASE_URL, which may be a team's real one.
fn refuse_demo_on_a_named_database(args: &ServeArgs) -> anyhow::Result<()> {
    if args.demo && args.database.database_url.is_some() {
        anyhow::bail!(
            "--demo adds a `demo` approver and demo workflows, so it runs only on the private \
             cluster: unset DATABASE_URL (and drop --database-url) to try the demo"
        );
    }
    Ok(())
}

/// Loads the adapters and spawns a worker that runs until `stopped`.
async fn spawn_worker(
    database: &Database,
    tuning: &WorkerTuning,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let adapters = engine::adapter::registry::Adapters::load(&database.pool).await?;
    let config = tuning.config();
    tracing::info!(worker = %config.name, concurrency = config.concurrency, "starting workers");
    let worker = engine::worker::Worker::new(database.pool.clone(), config, adapters);
    Ok(tokio::spawn(engine::maintenance::run_worker(
        worker,
        async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        },
    )))
}

/// `z29c worker`: workers only, until SIGINT or SIGTERM.
pub(crate) async fn worker(args: WorkerArgs) -> anyhow::Result<()> {
    let services = Services::start(crate::maintenance::of_every_process());
    let database = Database::open(&args.database).await?;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let metrics = match args.metrics_addr {
        Some(addr) => {
            Some(serve_worker_metrics(addr, database.pool.clone(), stopped.clone()).await?)
        }
        None => None,
    };
    let handle = spawn_worker(&database, &args.workers, stopped).await?;
    crate::shutdown::signal().await;
    let _ = stop.send(true);
    handle.await.context("the worker task panicked")?;
    if let Some(metrics) = metrics {
        metrics.await.context("the metrics listener panicked")?;
    }
    services.stop().await;
    database.close().await
}

/// Serves the worker process's latency histograms at `http://addr/metrics` until `stopped`,
/// to a token checked against `pool`.
async fn serve_worker_metrics(
    addr: std::net::SocketAddr,
    pool: sqlx::PgPool,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening for metrics scrapes on {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "serving the worker's metrics");
    let app = crate::http::scrape::worker_router(pool);
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            })
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the metrics listener stopped");
        }
    }))
}

// The tuning is read as a worker configuration only here, where workers start.
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
        config.adapter_refresh = Some(std::time::Duration::from_secs(5));
        config
    }
}

/// The services of a serving process (docs/DESIGN.md §19): the metrics upkeep, the outbox
/// publisher, alert evaluation, webhook and notification delivery (with `--webhook`), and
/// forgetting expired sessions and old sign-in attempts.
fn serving(pool: &sqlx::PgPool, args: &ObserverArgs) -> anyhow::Result<Vec<Box<dyn Service>>> {
    let every = Duration::from_secs(args.observe_every_secs.max(1));
    let publisher = engine::outbox::publisher::Publisher::new(
        pool.clone(),
        engine::outbox::consumers(args.webhook.clone()),
    );
    let mut services = crate::maintenance::of_every_process();
    services.push(Box::new(OutboxPublisher::new(
        publisher,
        Duration::from_secs(1),
    )));
    let rules = engine::watch::alerts::AlertRules {
        max_unknown_age: Duration::from_secs(args.alert_unknown_age_secs),
    };
    services.push(Box::new(engine::maintenance::alert_evaluation(
        pool.clone(),
        rules,
        every,
    )));
    services.push(Box::new(engine::maintenance::adapter_breaker(
        pool.clone(),
        every,
    )));
    if let Some(url) = &args.webhook {
        let key = args.webhook_secret.as_deref().context(
            "--webhook needs --webhook-secret (Z29C_WEBHOOK_SIGNING_SECRET): every alert and notification is signed with it, so receivers can refuse anyone else's",
        )?;
        let receiver =
            engine::outbox::webhook::Receiver::new(url.clone(), key).map_err(anyhow::Error::msg)?;
        services.push(Box::new(engine::maintenance::webhook_delivery(
            pool.clone(),
            receiver.clone(),
            every,
        )));
        services.push(Box::new(engine::maintenance::notification_delivery(
            pool.clone(),
            receiver,
            every,
        )));
    }
    services.push(Box::new(engine::maintenance::sign_in_forgetting(
        pool.clone(),
    )));
    services.push(Box::new(crate::maintenance::session_cleanup(
        tower_sessions_sqlx_store::PostgresStore::new(pool.clone()),
    )));
    Ok(services)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::cli::{Cli, Command};

    fn serve_args(argv: &[&str]) -> crate::cli::ServeArgs {
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Serve(args) => args,
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn the_demo_refuses_a_database_named_by_url_and_runs_on_the_private_cluster() {
        let named = serve_args(&[
            "z29c",
            "serve",
            "--demo",
            "--database-url",
            "postgres://db/prod",
        ]);
        let refusal = super::refuse_demo_on_a_named_database(&named).unwrap_err();
        assert!(
            refusal.to_string().contains("unset DATABASE_URL"),
            "{refusal}"
        );
        // Only the flag is read here, not the environment of the machine running the test.
        let mut private = named;
        private.database.database_url = None;
        assert!(super::refuse_demo_on_a_named_database(&private).is_ok());
    }
}
