//! Which PostgreSQL Z29C uses: the server named by `DATABASE_URL`, or a private cluster.

use std::fmt;
use std::path::PathBuf;

use anyhow::Context;
use engine::embedded_pg::{Durability, EmbeddedPostgres};
use sqlx::PgPool;

/// A connection URL; may hold a password, so it never prints.
#[derive(Clone)]
pub struct DatabaseUrl(String);

impl std::str::FromStr for DatabaseUrl {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DatabaseUrl(…)")
    }
}

/// Where the database comes from, shared by every command that needs one.
#[derive(Debug, Clone, clap::Args)]
pub struct DatabaseArgs {
    /// PostgreSQL server to use. Without it Z29C starts a private cluster in --pg-data-dir.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<DatabaseUrl>,
    /// Data directory of the private cluster used when no DATABASE_URL is given.
    #[arg(long, env = "Z29C_PG_DATA", default_value = ".z29c/pg")]
    pub pg_data_dir: PathBuf,
    /// Largest number of connections this process opens.
    #[arg(long, env = "Z29C_DB_MAX_CONNECTIONS", default_value_t = 24)]
    pub db_max_connections: u32,
}

/// An open, migrated database, and the private cluster behind it when there is one.
pub struct Database {
    pub pool: PgPool,
    cluster: Option<EmbeddedPostgres>,
}

impl Database {
    /// Connects to `DATABASE_URL` or starts the private cluster, then applies Z29C's migrations.
    pub async fn open(args: &DatabaseArgs) -> anyhow::Result<Self> {
        let database = Self::connect(args, "z29c").await?;
        engine::db::MIGRATOR
            .run(&database.pool)
            .await
            .context("applying Z29C's migrations")?;
        Ok(database)
    }

    /// Connects without applying any migration (a destination applies its own); `name` is the
    /// database created in a private cluster.
    pub async fn connect(args: &DatabaseArgs, name: &str) -> anyhow::Result<Self> {
        let (url, cluster) = match &args.database_url {
            Some(DatabaseUrl(url)) => (url.clone(), None),
            None => {
                let cluster = EmbeddedPostgres::start(&args.pg_data_dir, Durability::Durable)
                    .await
                    .context("starting the private PostgreSQL cluster")?;
                tracing::info!(
                    data_dir = %cluster.data_dir().display(),
                    port = cluster.port(),
                    owner = cluster.owns_server(),
                    "using the private PostgreSQL cluster (set DATABASE_URL to use another server)"
                );
                let url = cluster.ensure_database(name).await?;
                (url, Some(cluster))
            }
        };
        let pool = engine::db::connect(&url, args.db_max_connections)
            .await
            .context("connecting to the database")?;
        Ok(Self { pool, cluster })
    }

    /// Closes the pool and stops the private cluster, if this process started one.
    pub async fn close(self) -> anyhow::Result<()> {
        self.pool.close().await;
        if let Some(cluster) = self.cluster {
            let owned = cluster.owns_server();
            cluster
                .stop()
                .await
                .context("stopping the private PostgreSQL cluster")?;
            if owned {
                tracing::info!("stopped the private PostgreSQL cluster");
            }
        }
        Ok(())
    }
}
