//! Why a definition or adapter file was refused: a sentence, with the line (and column) where
//! the parser or a static check could place it.

use std::fmt;

/// A refused file: where, when known, and a sentence a person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// 1-based line, when the parser or the check could place the problem.
    pub line: Option<usize>,
    /// 1-based column on that line, when known.
    pub column: Option<usize>,
    /// What is wrong, as a sentence without the location.
    pub message: String,
    /// Text the problem is about, where no parser gave a line: [`FileError::placed_in`] finds
    /// the line that holds it.
    pub near: Option<String>,
}

impl FileError {
    /// A problem at `line` (when known).
    pub fn at(line: Option<usize>, message: impl Into<String>) -> Self {
        FileError {
            line,
            column: None,
            message: message.into(),
            near: None,
        }
    }

    /// A problem about `near` (a template, a step's name), placed later by
    /// [`FileError::placed_in`].
    pub fn about(near: impl Into<String>, message: impl Into<String>) -> Self {
        FileError {
            near: Some(near.into()),
            ..FileError::at(None, message)
        }
    }

    /// This problem with its line found in `source`, when it has none yet.
    pub fn placed_in(mut self, source: &str) -> Self {
        if self.line.is_none()
            && let Some(near) = &self.near
        {
            self.line = line_of(source, near);
        }
        self
    }

    /// A YAML parse error, with the location serde gave and the message without it.
    #[cfg(feature = "runtime")]
    pub fn from_yaml(error: &serde_yaml_ng::Error) -> Self {
        let location = error.location();
        let text = error.to_string();
        let message = match text.rfind(" at line ") {
            Some(at) if location.is_some() => text[..at].to_owned(),
            _ => text,
        };
        FileError {
            line: location.as_ref().map(|l| l.line()),
            column: location.as_ref().map(|l| l.column()),
            message,
            near: None,
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => {
                write!(f, "line {line}, column {column}: {}", self.message)
            }
            (Some(line), None) => write!(f, "line {line}: {}", self.message),
            (None, _) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for FileError {}

/// The first line of `source` (1-based) that contains `needle`, to place a static check's
/// finding where serde gives no location.
pub fn line_of(source: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    source
        .lines()
        .position(|line| line.contains(needle))
        .map(|i| i + 1)
}
