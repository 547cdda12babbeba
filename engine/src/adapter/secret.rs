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
            SecretRef::File(path) => std::fs::metadata(path)
                .ok()
                .filter(|m| m.is_file() && m.len() <= super::policy::MAX_SECRET_FILE_BYTES)
                .and_then(|_| std::fs::read_to_string(path).ok())
                .map(|text| text.trim_end_matches(['\n', '\r']).to_owned()),
        };
        match value {
            Some(value) if !value.is_empty() => Ok(Secret(value)),
            _ => Err(SecretError::NotSet(self.clone())),
        }
    }
}
