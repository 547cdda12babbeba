//! The database every bench and scenario runs on.

use engine::embedded_pg::{Durability, EmbeddedPostgres};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// The database a bench runs on: `DATABASE_URL` when set, else a fresh private cluster with
/// PostgreSQL's durable defaults, removed afterwards.
pub struct BenchDatabase {
    pub url: String,
    cluster: Option<(EmbeddedPostgres, tempfile::TempDir)>,
}

impl BenchDatabase {
    /// Connects to `DATABASE_URL`, or starts the private cluster with `pg_stat_statements`
    /// loaded.
    pub async fn open() -> anyhow::Result<Self> {
        if let Ok(url) = std::env::var("DATABASE_URL") {
            return Ok(Self { url, cluster: None });
        }
        let dir = tempfile::Builder::new().prefix("z29c-bench-").tempdir()?;
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
        let data = dir.path().join("pg");
        let cluster = EmbeddedPostgres::start(&data, Durability::Durable).await?;
        // Statement counts (round trips per step) need pg_stat_statements loaded at start.
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .connect(&cluster.url("postgres"))
            .await?;
        sqlx::query("alter system set shared_preload_libraries = 'pg_stat_statements'")
            .execute(&admin)
            .await?;
        admin.close().await;
        cluster.stop().await?;
        let cluster = EmbeddedPostgres::start(&data, Durability::Durable).await?;
        let url = cluster.ensure_database("z29c").await?;
        let setup = PgPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await?;
        if let Err(error) = sqlx::query("create extension if not exists pg_stat_statements")
            .execute(&setup)
            .await
        {
            eprintln!(
                "pg_stat_statements unavailable ({error}); statements per step will read n/a"
            );
        }
        setup.close().await;
        Ok(Self {
            url,
            cluster: Some((cluster, dir)),
        })
    }

    /// The private cluster this process started; `None` when `DATABASE_URL` named a server.
    pub fn cluster(&self) -> Option<&EmbeddedPostgres> {
        self.cluster.as_ref().map(|(cluster, _)| cluster)
    }

    /// A pool of `size` connections, with `synchronous_commit` off when `async_commit`.
    pub async fn pool(&self, size: u32, async_commit: bool) -> anyhow::Result<PgPool> {
        let mut options: PgConnectOptions = self.url.parse()?;
        if async_commit {
            options = options.options([("synchronous_commit", "off")]);
        }
        Ok(PgPoolOptions::new()
            .max_connections(size)
            .connect_with(options)
            .await?)
    }

    /// Stops the private cluster, if this process started one, and deletes it wherever it
    /// was placed.
    pub async fn close(self) -> anyhow::Result<()> {
        if let Some((cluster, _dir)) = self.cluster {
            cluster.stop_and_remove().await?;
        }
        Ok(())
    }
}
