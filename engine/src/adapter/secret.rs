//! Secrets an adapter file names: taken from the environment or a file when the adapter is
//! built, held in a type that never prints them, and added to a request only as it is sent —
//! never digested, recorded, stored or logged.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a secret lives: `{ env: NAME }` or `{ file: /path }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "SecretFile", into = "SecretFile")]
pub enum SecretRef {
    /// An environment variable of the process that builds the adapter.
    Env(String),
    /// A file whose contents (less a trailing newline) are the secret.
    File(PathBuf),
}

/// A secret reference as files write it: a map with exactly one of `env` and `file`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<PathBuf>,
}

impl TryFrom<SecretFile> for SecretRef {
    type Error = &'static str;

    fn try_from(written: SecretFile) -> Result<Self, Self::Error> {
        match (written.env, written.file) {
            (Some(name), None) if !name.is_empty() => Ok(SecretRef::Env(name)),
            (None, Some(path)) => Ok(SecretRef::File(path)),
            _ => Err("a secret is `{ env: NAME }` or `{ file: /path }`, exactly one of them"),
        }
    }
}

impl From<SecretRef> for SecretFile {
    fn from(secret: SecretRef) -> Self {
        match secret {
            SecretRef::Env(name) => SecretFile {
                env: Some(name),
                file: None,
            },
            SecretRef::File(path) => SecretFile {
                env: None,
                file: Some(path),
            },
        }
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretRef::Env(name) => write!(f, "`{name}` (environment variable)"),
            SecretRef::File(path) => write!(f, "`{}` (file)", path.display()),
        }
    }
}

/// Why a secret (or an environment-provided base URL) could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The variable or file is absent or empty (or not a small regular file).
    #[error("secret {0} is not set")]
    NotSet(SecretRef),
    /// The base URL's environment variable is absent or empty.
    #[error("the base URL's environment variable `{0}` is not set")]
    BaseUrlNotSet(String),
    /// The deployment does not let adapter files name this variable, file or host.
    #[error("{0}")]
    NotAllowed(String),
}

/// The text of the regular file at `path` if it holds at most
/// [`MAX_SECRET_FILE_BYTES`](super::policy::MAX_SECRET_FILE_BYTES), without its final line
/// break. Opened without blocking and checked on the handle, so a FIFO or a device put there
/// (even between a check and the open) is refused, never waited on or read without end.
fn read_small_file(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let max = super::policy::MAX_SECRET_FILE_BYTES;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .ok()?;
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.len() > max {
        return None;
    }
    let mut text = String::new();
    file.take(max + 1).read_to_string(&mut text).ok()?;
    (text.len() as u64 <= max).then(|| text.trim_end_matches(['\n', '\r']).to_owned())
}

/// A resolved secret. Its `Debug` and `Display` print `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret's value, for the one place that adds it to a request.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl SecretRef {
    /// Whether the deployment lets a file name this reference (its policy's variable prefix
    /// and secrets directory), saying nothing of whether it is set: what a file is checked
    /// against when it is applied, so applying cannot tell anyone which files exist.
    pub fn allowed(&self) -> Result<(), SecretError> {
        let policy = super::policy::current();
        match self {
            SecretRef::Env(name) => policy.allows_env(name),
            SecretRef::File(path) => policy.allows_file(path),
        }
        .map_err(SecretError::NotAllowed)
    }

    /// The secret's value, or why it is not set. A file must be a regular file of at most
    /// [`MAX_SECRET_FILE_BYTES`](super::policy::MAX_SECRET_FILE_BYTES): a device or a FIFO
    /// would block or never end, and is refused before it is opened.
    pub fn resolve(&self) -> Result<Secret, SecretError> {
        self.allowed()?;
        let value = match self {
            SecretRef::Env(name) => std::env::var(name).ok(),
            SecretRef::File(path) => read_small_file(path),
        };
        match value {
            Some(value) if !value.is_empty() => Ok(Secret(value)),
            _ => Err(SecretError::NotSet(self.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// This test process's policy: secret files in `dir` (nextest runs each test alone).
    fn secrets_in(dir: &std::path::Path) {
        super::super::policy::set(super::super::policy::Policy {
            secrets_dir: Some(std::fs::canonicalize(dir).unwrap()),
            ..super::super::policy::Policy::default()
        });
    }

    #[test]
    fn a_fifo_a_device_or_a_large_file_is_never_read_as_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        secrets_in(dir.path());
        let dir = std::fs::canonicalize(dir.path()).unwrap();
        let fifo = dir.join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let zero = dir.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let large = dir.join("large");
        std::fs::write(&large, vec![b'k'; 100 * 1024]).unwrap();
        let small = dir.join("small");
        std::fs::write(&small, "sk_test_1\n").unwrap();

        // A FIFO with no writer would block a reader for ever: it is refused at once.
        assert!(matches!(
            SecretRef::File(fifo).resolve(),
            Err(SecretError::NotSet(_))
        ));
        // A link out of the directory is refused by the policy, before anything is opened.
        assert!(matches!(
            SecretRef::File(zero).resolve(),
            Err(SecretError::NotAllowed(_))
        ));
        assert!(matches!(
            SecretRef::File(large).resolve(),
            Err(SecretError::NotSet(_))
        ));
        let read = SecretRef::File(small).resolve().unwrap();
        assert_eq!(read.expose(), "sk_test_1");
        let outside: PathBuf = "/etc/hostname".into();
        assert!(matches!(
            SecretRef::File(outside).resolve(),
            Err(SecretError::NotAllowed(_))
        ));
    }
}
