//! A private PostgreSQL cluster, started from the machine's own PostgreSQL binaries.
//!
//! Used when no `DATABASE_URL` is given (`z29c serve`, `make run`) and by `z29c db exec`, which
//! gives the test suite one throwaway cluster per run. The cluster listens on a free loopback
//! port only (no unix socket) and lets in only connections that give the `postgres` role's
//! password (SCRAM): 256 random bits made at `initdb` and kept in `<data-dir>/z29c-password`,
//! readable by the cluster's account alone (see [`auth`]); [`EmbeddedPostgres::url`] carries it.
//! It is stopped with `pg_ctl stop -m fast` by [`EmbeddedPostgres::stop`] or, as a last resort,
//! when the value is dropped.
//!
//! `initdb` refuses to run as root, so when Z29C runs as root the cluster runs as the `postgres`
//! system user (created by Debian's PostgreSQL packages) and its data directory is owned by it.
//! When that user cannot reach the directory asked for (a clone under `/root`), the cluster
//! lives under [`RELOCATED_ROOT`] instead, and [`EmbeddedPostgres::data_dir`] says where (see
//! [`place`]).
//!
//! Several `z29c` processes may use one data directory (say `z29c serve` and, meanwhile,
//! `z29c token create`). The process holding `<data-dir>.lock` owns the server: it starts it
//! and stops it. Another process finding the server running while the lock is held joins it
//! and leaves it running; one finding it running with the lock free adopts a server whose
//! owner was killed, and stops it when done. Each reads the password from the data directory.

pub mod auth;
pub mod place;

pub use auth::PASSWORD_FILE;
pub use place::RELOCATED_ROOT;

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Output;

use nix::fcntl::{Flock, FlockArg};
use sqlx::{Connection, PgConnection};

use auth::Password;
use place::{RunAs, data_dir_error};

/// The sentence shown when the machine has no PostgreSQL server binaries.
/// Seconds `pg_ctl` waits for the server to accept connections after a start or restart. Crash
/// recovery replays the WAL since the last checkpoint, which on a loaded machine has taken more
/// than a minute.
pub(crate) const START_WAIT_SECS: &str = "300";

pub const MISSING_BINARIES: &str = "No PostgreSQL server binaries (initdb, pg_ctl) were found on \
     PATH or under /usr/lib/postgresql/*/bin: install them (Debian/Ubuntu: `apt-get install \
     postgresql`) or set DATABASE_URL to a PostgreSQL server Z29C may use.";

/// Why the private cluster could not be started or used.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedPgError {
    /// `initdb` or `pg_ctl` is not installed.
    #[error("{MISSING_BINARIES}")]
    MissingBinaries,
    /// Running as root and no unprivileged `postgres` user exists to own the cluster.
    #[error(
        "running as root, and PostgreSQL refuses to run as root: create the `postgres` system user \
         (it comes with Debian's postgresql package) or run Z29C as an unprivileged user"
    )]
    NoUnprivilegedUser,
    /// A PostgreSQL tool ran and reported an error.
    #[error("`{tool}` failed (see {log}): {stderr}")]
    Tool {
        tool: &'static str,
        log: String,
        stderr: String,
    },
    /// Creating or changing the data directory failed.
    #[error("cannot prepare the data directory {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    /// Starting a tool or finding a free port failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Another process owns the data directory but its server is not running (starting up or
    /// shutting down).
    #[error("another z29c process holds {0} but its PostgreSQL is not running; try again shortly")]
    Busy(String),
    /// The cluster asks for a password but its password file is gone.
    #[error(
        "the private cluster asks for a password but its password file {0} is missing: restore \
         it from a backup of the data directory"
    )]
    NoPassword(String),
    /// The cluster started but did not accept the connection Z29C needs.
    #[error("the private cluster started but refused a connection: {0}")]
    Connect(#[from] sqlx::Error),
}

/// Tuning for a cluster whose contents may be thrown away (tests): no fsync, no full-page writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// PostgreSQL's defaults: every commit reaches the disk.
    Durable,
    /// For throwaway test clusters only: a crash may lose or corrupt data.
    Throwaway,
}

/// The PostgreSQL server binaries of this machine.
#[derive(Debug, Clone)]
pub struct PgBinaries {
    dir: PathBuf,
}

impl PgBinaries {
    /// Finds `initdb` and `pg_ctl` on PATH (following symlinks to their real directory) or in
    /// the newest `/usr/lib/postgresql/<major>/bin`.
    pub fn locate() -> Result<Self, EmbeddedPgError> {
        let on_path = std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|dir| dir.join("initdb"))
            .find(|p| p.is_file())
            .and_then(|p| std::fs::canonicalize(p).ok())
            .and_then(|p| p.parent().map(Path::to_path_buf));
        let dir = on_path
            .filter(|dir| dir.join("pg_ctl").is_file())
            .or_else(newest_debian_bin_dir)
            .ok_or(EmbeddedPgError::MissingBinaries)?;
        Ok(Self { dir })
    }

    /// The path of one of these programs (`initdb`, `pg_ctl`, `pg_dump`, …).
    pub fn program(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn tool(&self, name: &str) -> PathBuf {
        self.program(name)
    }
}

fn newest_debian_bin_dir() -> Option<PathBuf> {
    let mut majors: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((major, bin))
        })
        .collect();
    majors.sort();
    majors.pop().map(|(_, bin)| bin)
}

/// A running private cluster.
/// The login role Z29C's processes run as on the private cluster: what
/// `z29c_grant_application` grants, and no more (docs/DESIGN.md §15). The `postgres`
/// superuser applies the migrations.
pub const APP_ROLE: &str = "z29c_app";

#[derive(Debug)]
pub struct EmbeddedPostgres {
    bins: PgBinaries,
    data_dir: PathBuf,
    port: u16,
    run_as: RunAs,
    /// `None` only when joining a server an earlier Z29C started, which trusts every connection.
    password: Option<Password>,
    /// Held while this process owns the server; `None` when it joined another's.
    owner: Option<Flock<std::fs::File>>,
}

impl EmbeddedPostgres {
    /// Starts a cluster in `data_dir` (or where [`place`] puts it), creating it with `initdb`
    /// when the directory holds none, or joins the one another `z29c` process runs there (see
    /// the module documentation).
    pub async fn start(
        data_dir: impl AsRef<Path>,
        durability: Durability,
    ) -> Result<Self, EmbeddedPgError> {
        let bins = PgBinaries::locate()?;
        let run_as = RunAs::for_this_process()?;
        let data_dir = place::data_dir_for(&absolute(data_dir.as_ref())?, run_as).await?;
        let owner = lock(&data_dir)?;
        let mut pg = Self {
            bins,
            data_dir,
            port: 0,
            run_as,
            password: None,
            owner,
        };
        let running = pg.data_dir.join("PG_VERSION").is_file()
            && pg.pg_ctl(&["status"]).await?.status.success();
        match (running, pg.owner.is_some()) {
            (true, true) => {
                pg.port = pg.running_port()?;
                tracing::info!(data_dir = %pg.data_dir.display(), "adopting a server whose owner is gone");
                pg.secure().await?;
            }
            (true, false) => {
                pg.port = pg.running_port()?;
                pg.password = Password::read(&pg.data_dir)?;
                if pg.password.is_none() {
                    tracing::warn!(
                        data_dir = %pg.data_dir.display(),
                        "joining a server started by an earlier Z29C, which trusts every local \
                         connection until a process owning it starts it again"
                    );
                }
            }
            (false, true) => {
                if !pg.data_dir.join("PG_VERSION").is_file() {
                    pg.init().await?;
                }
                pg.port = free_loopback_port()?;
                pg.start_server(durability).await?;
                pg.secure().await?;
            }
            (false, false) => {
                return Err(EmbeddedPgError::Busy(
                    lock_path(&pg.data_dir).display().to_string(),
                ));
            }
        }
        Ok(pg)
    }

    /// The port of the server running in the data directory, from its `postmaster.pid`.
    fn running_port(&self) -> Result<u16, EmbeddedPgError> {
        let pid_file = std::fs::read_to_string(self.data_dir.join("postmaster.pid"))?;
        pid_file
            .lines()
            .nth(3)
            .and_then(|line| line.trim().parse().ok())
            .ok_or_else(|| EmbeddedPgError::Busy(self.data_dir.display().to_string()))
    }

    /// Leaves the server running and gives up ownership, as a killed process would: the next
    /// [`EmbeddedPostgres::start`] on the directory adopts it.
    pub fn detach(mut self) {
        self.owner = None;
    }

    /// Whether this process owns (and will stop) the server.
    pub fn owns_server(&self) -> bool {
        self.owner.is_some()
    }

    async fn start_server(&self, durability: Durability) -> Result<(), EmbeddedPgError> {
        let mut options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -c unix_socket_directories='' -c max_connections=300",
            self.port
        );
        if durability == Durability::Throwaway {
            options.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        let log = self.log_file();
        let output = self
            .run_as
            .command(self.bins.tool("pg_ctl"))
            .arg("-D")
            .arg(&self.data_dir)
            .arg("-l")
            .arg(&log)
            .args(["-o", &options, "-w", "-t", START_WAIT_SECS, "start"])
            .output()
            .await?;
        check("pg_ctl start", &self.data_dir, output)
    }

    async fn stop_server(&self) -> Result<(), EmbeddedPgError> {
        let output = self.pg_ctl(&["-m", "fast", "-w", "stop"]).await?;
        check("pg_ctl stop", &self.data_dir, output)
    }

    async fn pg_ctl(&self, args: &[&str]) -> std::io::Result<Output> {
        self.run_as
            .command(self.bins.tool("pg_ctl"))
            .arg("-D")
            .arg(&self.data_dir)
            .args(args)
            .output()
            .await
    }

    /// Restarts the server as a crash would (`-m immediate`: open connections are cut, no
    /// shutdown checkpoint, crash recovery at start), on the same port and settings.
    pub async fn crash_restart(&self) -> Result<(), EmbeddedPgError> {
        let log = self.log_file();
        let log = log.to_string_lossy();
        let output = self
            .pg_ctl(&[
                "-m",
                "immediate",
                "-w",
                "-t",
                START_WAIT_SECS,
                "-l",
                &log,
                "restart",
            ])
            .await?;
        check("pg_ctl restart", &self.data_dir, output)
    }

    /// The path of a PostgreSQL program beside this server's (`pg_dump`, `pg_restore`).
    pub fn program(&self, name: &str) -> PathBuf {
        self.bins.tool(name)
    }

    fn log_file(&self) -> PathBuf {
        self.data_dir.join("server.log")
    }

    /// The loopback port the cluster listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory of the cluster.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A connection URL for `database` on this cluster, carrying the cluster's password.
    pub fn url(&self, database: &str) -> String {
        let port = self.port;
        match &self.password {
            Some(password) => format!(
                "postgres://postgres:{}@127.0.0.1:{port}/{database}",
                password.url_encoded()
            ),
            None => format!("postgres://postgres@127.0.0.1:{port}/{database}"),
        }
    }

    /// A connection URL for `database` as the application role ([`APP_ROLE`]), which
    /// [`EmbeddedPostgres::ensure_app_role`] creates.
    pub fn app_url(&self, database: &str) -> String {
        let port = self.port;
        match &self.password {
            Some(password) => format!(
                "postgres://{APP_ROLE}:{}@127.0.0.1:{port}/{database}",
                password.derived("z29c application role")
            ),
            None => format!("postgres://{APP_ROLE}@127.0.0.1:{port}/{database}"),
        }
    }

    /// Creates the application role unless it exists, gives it its password, and grants it
    /// what `z29c_grant_application` grants in `database` (call it after the migrations).
    pub async fn ensure_app_role(&self, database: &str) -> Result<(), EmbeddedPgError> {
        let mut conn = PgConnection::connect(&self.url(database)).await?;
        let password = self
            .password
            .as_ref()
            .map(|p| p.derived("z29c application role"));
        crate::store::schema::ensure_application_role(&mut conn, APP_ROLE, password.as_deref())
            .await?;
        conn.close().await?;
        Ok(())
    }

    /// Creates `database` unless it exists, and returns its URL.
    pub async fn ensure_database(&self, database: &str) -> Result<String, EmbeddedPgError> {
        let mut conn = PgConnection::connect(&self.url("postgres")).await?;
        let exists = crate::store::schema::database_exists(&mut conn, database).await?;
        if !exists {
            // Identifiers cannot be bound as parameters; quote it as PostgreSQL's quote_ident does.
            let ident = format!("\"{}\"", database.replace('"', "\"\""));
            sqlx::raw_sql(&format!("create database {ident}"))
                .execute(&mut conn)
                .await?;
        }
        conn.close().await?;
        Ok(self.url(database))
    }

    /// Stops the cluster and waits until it has shut down, if this process owns it; otherwise
    /// leaves it to its owner.
    pub async fn stop(mut self) -> Result<(), EmbeddedPgError> {
        match self.owner.take() {
            Some(lock) => {
                let stopped = self.stop_server().await;
                drop(lock);
                stopped
            }
            None => Ok(()),
        }
    }

    /// Stops a throwaway cluster this process owns and deletes its data directory (wherever
    /// [`place`] put it) and its lock file; a joined cluster is left to its owner.
    pub async fn stop_and_remove(self) -> Result<(), EmbeddedPgError> {
        let owned = self.owns_server();
        let data_dir = self.data_dir.clone();
        self.stop().await?;
        if owned {
            std::fs::remove_dir_all(&data_dir).map_err(|e| data_dir_error(&data_dir, e))?;
            let lock = lock_path(&data_dir);
            std::fs::remove_file(&lock).map_err(|e| data_dir_error(&lock, e))?;
        }
        Ok(())
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        if self.owner.is_some() {
            // Last resort (a panic or an early return): never leave a server behind.
            let _ = self
                .run_as
                .std_command(self.bins.tool("pg_ctl"))
                .arg("-D")
                .arg(&self.data_dir)
                .args(["-m", "immediate", "-w", "stop"])
                .output();
        }
    }
}

fn lock_path(data_dir: &Path) -> PathBuf {
    let mut name = data_dir.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    data_dir.with_file_name(name)
}

/// Takes the data directory's ownership lock if it is free.
fn lock(data_dir: &Path) -> Result<Option<Flock<std::fs::File>>, EmbeddedPgError> {
    let path = lock_path(data_dir);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| EmbeddedPgError::DataDir {
            path: parent.display().to_string(),
            source,
        })?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, errno)) => Err(std::io::Error::from(errno).into()),
    }
}

fn check(tool: &'static str, data_dir: &Path, output: Output) -> Result<(), EmbeddedPgError> {
    if output.status.success() {
        return Ok(());
    }
    let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if stderr.is_empty() {
        stderr = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    }
    Err(EmbeddedPgError::Tool {
        tool,
        log: data_dir.join("server.log").display().to_string(),
        stderr,
    })
}

fn absolute(path: &Path) -> Result<PathBuf, EmbeddedPgError> {
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    })
}

fn free_loopback_port() -> std::io::Result<u16> {
    // The port is released before PostgreSQL binds it; another process taking it in between
    // makes `pg_ctl start` fail with a clear message rather than connect somewhere else.
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}
