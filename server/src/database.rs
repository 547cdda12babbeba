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
    /// With DATABASE_URL: the role that owns the schema, which applies the migrations and
    /// grants DATABASE_URL's role what it needs (docs/DESIGN.md §15). Unset, DATABASE_URL's
    /// role does both.
    #[arg(long, env = "Z29C_MIGRATE_DATABASE_URL")]
    pub migrate_database_url: Option<DatabaseUrl>,
    /// Data directory of the private cluster used when no DATABASE_URL is given.
    #[arg(long, env = "Z29C_PG_DATA", default_value = ".z29c/pg")]
    pub pg_data_dir: PathBuf,
    /// Largest number of connections this process opens.
    #[arg(long, env = "Z29C_DB_MAX_CONNECTIONS", default_value_t = 24)]
    pub db_max_connections: u32,
}

/// An open, migrated database, and the private cluster behind it when there is one.
pub struct Database {
    /// As the application role: what every command but a restore needs.
    pub pool: PgPool,
    /// The schema owner's URL, when it is another role than the pool's.
    owner_url: Option<String>,
    cluster: Option<EmbeddedPostgres>,
}

impl Database {
    /// Connects to `DATABASE_URL` or starts the private cluster and applies Z29C's migrations
    /// as the schema's owner, then opens the pool as the application role (docs/DESIGN.md
    /// §15): on the private cluster `z29c_app`, which it creates and grants; with DATABASE_URL
    /// its role, granted by Z29C_MIGRATE_DATABASE_URL's when that is set.
    pub async fn open(args: &DatabaseArgs) -> anyhow::Result<Self> {
        let opened = Self::connect(args, "z29c").await?;
        match (&opened.cluster, &args.migrate_database_url) {
            (Some(cluster), _) => {
                // `connect` reached the private cluster as its superuser, the schema's owner.
                migrate(&opened.pool).await?;
                cluster.ensure_app_role("z29c").await?;
                let pool = engine::db::connect(&cluster.app_url("z29c"), args.db_max_connections)
                    .await
                    .context("connecting as the application role")?;
                opened.pool.close().await;
                Ok(Self {
                    pool,
                    owner_url: Some(cluster.url("z29c")),
                    ..opened
                })
            }
            (None, Some(DatabaseUrl(owner_url))) => {
                let migrator = engine::db::connect(owner_url, 2)
                    .await
                    .context("connecting as Z29C_MIGRATE_DATABASE_URL's role")?;
                let app = opened.pool.connect_options().get_username().to_owned();
                let granted = async {
                    migrate(&migrator).await?;
                    sqlx::query("select z29c_grant_application($1)")
                        .bind(&app)
                        .execute(&migrator)
                        .await
                        .with_context(|| format!("granting `{app}` what Z29C needs"))?;
                    anyhow::Ok(())
                }
                .await;
                migrator.close().await;
                granted?;
                Ok(Self {
                    owner_url: Some(owner_url.clone()),
                    ..opened
                })
            }
            (None, None) => {
                migrate(&opened.pool).await?;
                Ok(opened)
            }
        }
    }

    /// A pool as the schema's owner, for what the application role may not do (re-basing
    /// the outbox of a restored database); the application pool when there is no other.
    pub async fn owner(&self) -> anyhow::Result<PgPool> {
        match &self.owner_url {
            Some(url) => Ok(engine::db::connect(url, 2).await?),
            None => Ok(self.pool.clone()),
        }
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
        Ok(Self {
            pool,
            owner_url: None,
            cluster,
        })
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

async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    engine::db::MIGRATOR
        .run(pool)
        .await
        .context("applying Z29C's migrations")
}
