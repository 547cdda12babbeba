//! The cluster's password: 256 random bits generated at `initdb`, kept in
//! `<data-dir>/z29c-password` (0600, the cluster's account's), asked of every connection with
//! SCRAM. A cluster made by an earlier Z29C, which trusted every local connection, is given a
//! password the first time a process owning it starts it.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use argon2::password_hash::rand_core::{OsRng, RngCore};
use sqlx::{Connection, PgConnection};

use super::place::{RunAs, data_dir_error};
use super::{EmbeddedPgError, EmbeddedPostgres, START_WAIT_SECS, check};

/// The file, in the data directory, that holds the `postgres` role's password.
pub const PASSWORD_FILE: &str = "z29c-password";

/// What `pg_hba.conf` says once a trusting cluster has been given a password (the same rules
/// `initdb --auth=scram-sha-256` writes).
const SCRAM_ONLY_HBA: &str = "\
# Written by Z29C: every connection gives the postgres role's password (SCRAM), which Z29C
# keeps in z29c-password beside this file. The server listens on 127.0.0.1 only, no socket.
# TYPE  DATABASE        USER            ADDRESS                 METHOD
local   all             all                                     scram-sha-256
host    all             all             127.0.0.1/32            scram-sha-256
host    all             all             ::1/128                 scram-sha-256
local   replication     all                                     scram-sha-256
host    replication     all             127.0.0.1/32            scram-sha-256
host    replication     all             ::1/128                 scram-sha-256
";

/// The password of the cluster's `postgres` superuser; never printed.
#[derive(Clone)]
pub(super) struct Password(String);

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(…)")
    }
}

impl Password {
    /// 256 bits from the operating system's generator, as 64 hex digits.
    fn generate() -> Self {
        let mut bytes = [0u8; 32];
        OsRng.fill_bytes(&mut bytes);
        Self(hex::encode(bytes))
    }

    /// The password kept in `data_dir`, if there is one.
    pub(super) fn read(data_dir: &Path) -> Result<Option<Self>, EmbeddedPgError> {
        let path = data_dir.join(PASSWORD_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(Self(text.trim().to_owned()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(data_dir_error(&path, source)),
        }
    }

    /// Another password derived from this one for `purpose` (64 hex digits): the application
    /// role's, which every process that can read this one can compute, and no one else.
    pub(super) fn derived(&self, purpose: &str) -> String {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(purpose.as_bytes());
        hash.update([0]);
        hash.update(self.0.as_bytes());
        hex::encode(hash.finalize())
    }

    /// The password as it goes in a URL's user-info (ours are hex, which needs no escaping).
    pub(super) fn url_encoded(&self) -> String {
        let mut out = String::with_capacity(self.0.len());
        for byte in self.0.bytes() {
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                out.push(char::from(byte));
            } else {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
        out
    }
}

/// Writes `contents` to `path` through a new 0600 file owned by the cluster's account, renamed
/// into place, so no reader ever sees a half-written file or one open to others.
fn write_private(path: &Path, contents: &str, run_as: RunAs) -> Result<(), EmbeddedPgError> {
    let mut fresh = path.as_os_str().to_owned();
    fresh.push(".new");
    let fresh = PathBuf::from(fresh);
    let written = (|| {
        match std::fs::remove_file(&fresh) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&fresh)?;
        file.write_all(contents.as_bytes())?;
        file.sync_all()
    })();
    written.map_err(|source| data_dir_error(path, source))?;
    run_as.own(&fresh)?;
    std::fs::rename(&fresh, path).map_err(|source| data_dir_error(path, source))
}

/// Whether every rule of `pg_hba.conf` asks for a SCRAM password.
fn scram_only(hba: &str) -> bool {
    hba.lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .filter(|rule| !rule.trim().is_empty())
        .all(|rule| rule.split_whitespace().any(|word| word == "scram-sha-256"))
}

impl EmbeddedPostgres {
    /// Creates the cluster with a fresh password, given to `initdb` through a 0600 file beside
    /// the data directory which then becomes the data directory's password file.
    pub(super) async fn init(&mut self) -> Result<(), EmbeddedPgError> {
        std::fs::create_dir_all(&self.data_dir)
            .and_then(|()| {
                std::fs::set_permissions(
                    &self.data_dir,
                    std::os::unix::fs::PermissionsExt::from_mode(0o700),
                )
            })
            .map_err(|source| data_dir_error(&self.data_dir, source))?;
        self.run_as.own(&self.data_dir)?;
        let password = Password::generate();
        let mut name = std::ffi::OsString::from(".");
        name.push(self.data_dir.file_name().unwrap_or_default());
        name.push(".initdb-password");
        let pwfile = self.data_dir.with_file_name(name);
        write_private(&pwfile, &format!("{}\n", password.0), self.run_as)?;
        let output = self
            .run_as
            .command(self.bins.tool("initdb"))
            .arg("-D")
            .arg(&self.data_dir)
            .arg(format!("--pwfile={}", pwfile.display()))
            .args([
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
            ])
            .output()
            .await;
        let made = output
            .map_err(EmbeddedPgError::from)
            .and_then(|output| check("initdb", &self.data_dir, output));
        if let Err(error) = made {
            let _ = std::fs::remove_file(&pwfile);
            return Err(error);
        }
        std::fs::rename(&pwfile, self.data_dir.join(PASSWORD_FILE))
            .map_err(|source| data_dir_error(&self.data_dir, source))?;
        self.password = Some(password);
        Ok(())
    }

    /// For the process owning the running server: reads the password, first giving one to a
    /// cluster that still trusts local connections (made by an earlier Z29C): stored, set on
    /// the `postgres` role over the still-trusting connection, then `pg_hba.conf` rewritten to
    /// SCRAM only and the server restarted so that no connection is trusted any more.
    pub(super) async fn secure(&mut self) -> Result<(), EmbeddedPgError> {
        let hba_path = self.data_dir.join("pg_hba.conf");
        let hba = std::fs::read_to_string(&hba_path)
            .map_err(|source| data_dir_error(&hba_path, source))?;
        let stored = Password::read(&self.data_dir)?;
        if scram_only(&hba) {
            let path = self.data_dir.join(PASSWORD_FILE).display().to_string();
            self.password = Some(stored.ok_or(EmbeddedPgError::NoPassword(path))?);
            return Ok(());
        }
        tracing::info!(
            data_dir = %self.data_dir.display(),
            "the private cluster trusts local connections (made by an earlier Z29C): giving it a \
             password, kept in {PASSWORD_FILE}, and asking every connection for it"
        );
        let password = match stored {
            Some(password) => password,
            None => {
                let password = Password::generate();
                write_private(&self.data_dir.join(PASSWORD_FILE), &password.0, self.run_as)?;
                password
            }
        };
        // Trusted connections ignore the password, so the URL works before and after.
        self.password = Some(password.clone());
        let mut conn = PgConnection::connect(&self.url("postgres")).await?;
        // A hex password needs no quoting; the literal is built for it alone.
        sqlx::raw_sql(&format!(
            "set password_encryption = 'scram-sha-256'; alter role postgres password '{}'",
            password.0.replace('\'', "''")
        ))
        .execute(&mut conn)
        .await?;
        conn.close().await?;
        write_private(&hba_path, SCRAM_ONLY_HBA, self.run_as)?;
        let log = self.log_file();
        let log = log.to_string_lossy();
        let output = self
            .pg_ctl(&[
                "-m",
                "fast",
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
}
