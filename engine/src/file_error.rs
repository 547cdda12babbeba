//! Why a definition or adapter file was refused: a sentence, and the line where serde saw it.

use std::fmt;

/// A file refused at parse or check time; nothing of it was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl FileError {
    /// A refusal that serde could not place on a line (a check across fields).
    pub fn unplaced(message: impl Into<String>) -> Self {
        FileError {
            line: None,
            column: None,
            message: message.into(),
        }
    }

    /// The YAML parser's own refusal, with its line and column.
    pub fn from_yaml(error: &serde_yaml_ng::Error) -> Self {
        let location = error.location();
        let message = error.to_string();
        // serde_yaml_ng appends " at line L column C"; the line is reported on its own.
        let message = match message.find(" at line ") {
            Some(at) => message[..at].to_owned(),
            None => message,
        };
        FileError {
            line: location.as_ref().map(|l| l.line()),
            column: location.as_ref().map(|l| l.column()),
            message,
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for FileError {}
