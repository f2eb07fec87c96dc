//! The CLI's one error type: an engine error on a pool, a broken workload
//! invariant, or a failure of the CLI's own file handling.
//!
//! Each renders as one line (no trailing period, no newline) so that `main`
//! can print `engram: <message>`. Engine messages that do not already name
//! the pool file get its path in front, so "open pool file: No such file or
//! directory" becomes "data/x.pool: open pool file: No such file or directory".

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// The engine reported `source`, while working on `path` if known.
    Engine {
        /// The pool file, when the failure concerns one.
        path: Option<PathBuf>,
        /// The engine's error.
        source: engram::Error,
    },
    /// A workload invariant (demo ledger, torture state) does not hold.
    Invariant {
        /// What was found, in words.
        what: String,
    },
    /// The arguments make no sense together (exit status 2, like clap's).
    Usage {
        /// What is wrong with them.
        what: String,
    },
    /// The CLI's own file handling failed (e.g. creating `data/`).
    Io {
        /// What the CLI was doing.
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl CliError {
    /// A broken invariant described by `what`.
    pub fn invariant(what: impl Into<String>) -> Self {
        CliError::Invariant { what: what.into() }
    }

    /// Attaches `path` to an engine error that names no file yet.
    pub fn at(self, path: &Path) -> Self {
        match self {
            CliError::Engine { path: None, source } => CliError::Engine { path: Some(path.to_path_buf()), source },
            other => other,
        }
    }

    /// The process exit status for this error: 2 for usage, 1 otherwise.
    pub fn exit_status(&self) -> u8 {
        match self {
            CliError::Usage { .. } => 2,
            _ => 1,
        }
    }

    /// The engine error inside, if this is one.
    pub fn engine(&self) -> Option<&engram::Error> {
        match self {
            CliError::Engine { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<engram::Error> for CliError {
    fn from(source: engram::Error) -> Self {
        CliError::Engine { path: None, source }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Engine { path, source } => {
                let msg = source.to_string();
                match path {
                    Some(p) if !msg.contains(&p.display().to_string()) => write!(f, "{}: {msg}", p.display()),
                    _ => f.write_str(&msg),
                }
            }
            CliError::Invariant { what } => write!(f, "invariant violated: {what}"),
            CliError::Usage { what } => f.write_str(what),
            CliError::Io { op, path, source } => write!(f, "{}: {op}: {source}", path.display()),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Engine { source, .. } => Some(source),
            CliError::Io { source, .. } => Some(source),
            CliError::Invariant { .. } | CliError::Usage { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_is_added_once() {
        let p = Path::new("/tmp/x.pool");
        let e = CliError::from(engram::Error::ReadOnly).at(p);
        assert_eq!(e.to_string(), "/tmp/x.pool: pool was opened read-only");
        let e = CliError::from(engram::Error::NotAPool { path: p.into() }).at(p);
        assert_eq!(e.to_string(), "/tmp/x.pool: not an Engram pool (bad magic)");
    }
}
