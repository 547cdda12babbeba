//! As whom the cluster runs, and where its data directory is.
//!
//! `initdb` refuses to run as root, so when Z29C runs as root the cluster runs as the `postgres`
//! system user. That user must reach the data directory; a clone under `/root` (or in any 0700
//! directory) is closed to it. Rather than open the user's directories, such a cluster lives
//! under [`RELOCATED_ROOT`], in a directory named after the one asked for.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::unistd::{Gid, Uid, User};
use sha2::{Digest, Sha256};
use tokio::process::Command;

use super::EmbeddedPgError;

/// Where a cluster lives when the `postgres` user cannot reach the directory asked for.
pub const RELOCATED_ROOT: &str = "/var/lib/z29c/clusters";

/// The account the cluster's processes run as.
#[derive(Debug, Clone, Copy)]
pub(super) enum RunAs {
    CurrentUser,
    Other { uid: Uid, gid: Gid },
}

impl RunAs {
    pub(super) fn for_this_process() -> Result<Self, EmbeddedPgError> {
        if !Uid::effective().is_root() {
            return Ok(RunAs::CurrentUser);
        }
        let user = User::from_name("postgres")
            .ok()
            .flatten()
            .ok_or(EmbeddedPgError::NoUnprivilegedUser)?;
        Ok(RunAs::Other {
            uid: user.uid,
            gid: user.gid,
        })
    }

    pub(super) fn command(self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        // initdb and postgres resolve the working directory; root's may be closed to them.
        cmd.current_dir("/").kill_on_drop(true);
        if let RunAs::Other { uid, gid } = self {
            cmd.uid(uid.as_raw()).gid(gid.as_raw());
        }
        cmd
    }

    pub(super) fn std_command(self, program: impl AsRef<OsStr>) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(program);
        cmd.current_dir("/");
        if let RunAs::Other { uid, gid } = self {
            cmd.uid(uid.as_raw()).gid(gid.as_raw());
        }
        cmd
    }

    /// Gives `path` to the cluster's account (nothing to do when that is this process's).
    pub(super) fn own(self, path: &Path) -> Result<(), EmbeddedPgError> {
        if let RunAs::Other { uid, gid } = self {
            nix::unistd::chown(path, Some(uid), Some(gid))
                .map_err(|e| data_dir_error(path, e.into()))?;
        }
        Ok(())
    }

    /// Whether the cluster's account may search `dir`, asked of the kernel as that account
    /// (`test -x`, so every directory on the way, ACLs included, is taken into account).
    async fn can_search(self, dir: &Path) -> Result<bool, EmbeddedPgError> {
        let status = self.command("test").arg("-x").arg(dir).status().await?;
        Ok(status.success())
    }
}

/// The data directory to use for `requested` (absolute): `requested` itself, unless the cluster
/// runs as another account that cannot reach it. A cluster already made in either place stays
/// where it is.
pub(super) async fn data_dir_for(
    requested: &Path,
    run_as: RunAs,
) -> Result<PathBuf, EmbeddedPgError> {
    if matches!(run_as, RunAs::CurrentUser) || requested.join("PG_VERSION").is_file() {
        return Ok(requested.to_path_buf());
    }
    let ancestor = nearest_existing(requested);
    let relocated = relocated(requested, ancestor);
    if !relocated.join("PG_VERSION").is_file() && run_as.can_search(ancestor).await? {
        return Ok(requested.to_path_buf());
    }
    prepare_relocated_root()?;
    tracing::info!(
        requested = %requested.display(),
        data_dir = %relocated.display(),
        "the postgres user cannot reach the requested data directory, so the private cluster \
         lives in data_dir instead (the requested directory's permissions are left alone)"
    );
    Ok(relocated)
}

fn nearest_existing(path: &Path) -> &Path {
    path.ancestors()
        .find(|dir| dir.exists())
        .unwrap_or(Path::new("/"))
}

/// `<RELOCATED_ROOT>/<16 hex digits of the requested path's sha256>-<its last component>`: the
/// same directory every time the same directory is asked for.
fn relocated(requested: &Path, ancestor: &Path) -> PathBuf {
    let stable = std::fs::canonicalize(ancestor)
        .map(|real| real.join(requested.strip_prefix(ancestor).unwrap_or(Path::new(""))))
        .unwrap_or_else(|_| requested.to_path_buf());
    let digest = Sha256::digest(stable.as_os_str().as_encoded_bytes());
    let last: String = requested
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    Path::new(RELOCATED_ROOT).join(format!("{}-{last}", &hex::encode(digest)[..16]))
}

/// Creates `/var/lib/z29c` and [`RELOCATED_ROOT`] (root's, 0755: each cluster's own directory
/// inside is 0700 and the cluster's).
fn prepare_relocated_root() -> Result<(), EmbeddedPgError> {
    let root = Path::new(RELOCATED_ROOT);
    for dir in [root.parent().unwrap_or(root), root] {
        if dir.is_dir() {
            continue;
        }
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)))
            .map_err(|source| data_dir_error(dir, source))?;
    }
    Ok(())
}

pub(super) fn data_dir_error(path: &Path, source: std::io::Error) -> EmbeddedPgError {
    EmbeddedPgError::DataDir {
        path: path.display().to_string(),
        source,
    }
}
