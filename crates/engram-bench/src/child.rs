//! Running one measurement in a child process, and the errors of a run,
//! shared by both benchmark stacks (regions: `job.rs` and `main.rs`; STM:
//! `stm/job.rs` and `stm/cli.rs`).
//!
//! Every measurement runs in a fresh `engram-bench` process, so one job's
//! heap, caches and threads cannot disturb the next, and a PMDK job gets
//! exactly the environment its mode needs (`PMEM_IS_PMEM_FORCE`). The child
//! prints one result line: a tag, then `key=value` words; the parent finds
//! that line in the child's stdout.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that makes libpmemobj treat any file as
/// persistent memory (flush with CLWB/CLFLUSHOPT instead of msync).
pub const PMEM_FORCE_VAR: &str = "PMEM_IS_PMEM_FORCE";

/// Why a child process gave no result.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The child process could not be started or waited for.
    #[error("cannot run the child process {exe:?}: {source}")]
    Spawn {
        /// The executable.
        exe: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The child process failed.
    #[error("child `{args}` failed ({status}): {stderr}")]
    Failed {
        /// The child's arguments.
        args: String,
        /// How it exited.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The child's output had no readable result line.
    #[error("child `{args}` printed no result line; stdout: {stdout:?}")]
    NoResult {
        /// The child's arguments.
        args: String,
        /// What it printed on stdout.
        stdout: String,
    },
}

/// Why a whole benchmark run (`engram-bench all`, `engram-bench stm`)
/// stopped; `J` is the stack's job error.
#[derive(Debug, thiserror::Error)]
pub enum RunError<J: std::error::Error + 'static> {
    /// The pool directory could not be created.
    #[error("pool directory {dir:?}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The benchmark binary could not find itself to run its jobs.
    #[error("cannot find this program to run its jobs: {0}")]
    Exe(std::io::Error),
    /// A job failed.
    #[error("{0}")]
    Job(#[from] J),
    /// A report file could not be written.
    #[error("writing {path:?}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Removes a pool file when dropped (a measurement's pool, even if it fails).
pub struct PoolFile(pub PathBuf);

impl Drop for PoolFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `exe args`, with [`PMEM_FORCE_VAR`]`=1` if `pmem_force` (removed
/// otherwise), and returns the first stdout line `parse` accepts.
pub fn run<T>(exe: &Path, args: &[String], pmem_force: bool, parse: impl Fn(&str) -> Option<T>) -> Result<T, ChildError> {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    if pmem_force {
        cmd.env(PMEM_FORCE_VAR, "1");
    } else {
        cmd.env_remove(PMEM_FORCE_VAR);
    }
    let out = cmd.output().map_err(|source| ChildError::Spawn { exe: exe.to_path_buf(), source })?;
    let joined = args.join(" ");
    if !out.status.success() {
        return Err(ChildError::Failed {
            args: joined,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().find_map(parse).ok_or_else(|| ChildError::NoResult { args: joined, stdout: stdout.into_owned() })
}

/// The `key=value` words of a result line starting with `tag`, or None if
/// it does not start with it or a word has no `=`.
pub fn fields<'a>(line: &'a str, tag: &str) -> Option<HashMap<&'a str, &'a str>> {
    let mut words = line.split_whitespace();
    if words.next()? != tag {
        return None;
    }
    words.map(|w| w.split_once('=')).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_fields() {
        let f = fields("TAG a=1 b=x", "TAG").unwrap();
        assert_eq!((f["a"], f["b"]), ("1", "x"));
        assert!(fields("OTHER a=1", "TAG").is_none());
        assert!(fields("TAG a", "TAG").is_none());
        assert!(fields("TAG", "TAG").unwrap().is_empty());
    }

    #[test]
    fn a_missing_child_is_a_spawn_error() {
        let e = run(Path::new("/nonexistent/engram-bench"), &["x".into()], false, |_| Some(())).unwrap_err();
        assert!(matches!(e, ChildError::Spawn { .. }), "{e}");
    }

    #[test]
    fn a_child_without_a_result_line() {
        let e = run(Path::new("/bin/echo"), &["hello".into()], false, |l| fields(l, "TAG").map(|f| f.len())).unwrap_err();
        assert!(matches!(e, ChildError::NoResult { .. }), "{e}");
        let e = run(Path::new("/bin/false"), &[], false, |_| Some(())).unwrap_err();
        assert!(matches!(e, ChildError::Failed { .. }), "{e}");
    }
}
