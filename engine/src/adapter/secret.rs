//! Secrets an adapter file names: taken from the environment or a file when the adapter is
//! built, held in a type that never prints them, and added to a request only as it is sent —
//! never digested, recorded, stored or logged.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where a secret lives: `{ env: NAME }` or `{ file: /path }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SecretRef {
    /// An environment variable of the process that builds the adapter.
    Env(String),
    /// A file whose contents (less a trailing newline) are the secret.
    File(PathBuf),
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
    /// The variable or file is absent or empty.
    #[error("secret {0} is not set")]
    NotSet(SecretRef),
    /// The base URL's environment variable is absent or empty.
    #[error("the base URL's environment variable `{0}` is not set")]
    BaseUrlNotSet(String),
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
    /// The secret's value, or why it is not set.
    pub fn resolve(&self) -> Result<Secret, SecretError> {
        let value = match self {
            SecretRef::Env(name) => std::env::var(name).ok(),
            SecretRef::File(path) => std::fs::read_to_string(path)
                .ok()
                .map(|text| text.trim_end_matches(['\n', '\r']).to_owned()),
        };
        match value {
            Some(value) if !value.is_empty() => Ok(Secret(value)),
            _ => Err(SecretError::NotSet(self.clone())),
        }
    }
}
