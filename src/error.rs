//! One error type whose variant decides the process exit code.
//!
//! Exit codes (documented in the README): 0 success; 1 the measurement failed;
//! 2 bad usage or bad input; 3 needs privileges it does not have; 4 environment
//! problem (no space, read-only, missing device); 5 a comparison found a
//! regression (only with `--fail-on-regression`); 130 interrupted.

use rustix::io::Errno;
use std::io;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The measurement itself failed (exit 1).
    #[error("{0}")]
    Measurement(String),
    /// Bad usage or bad input (exit 2).
    #[error("{0}")]
    Usage(String),
    /// Needs privileges it does not have (exit 3).
    #[error("{0}")]
    Privilege(String),
    /// Environment problem: no space, read-only, missing device (exit 4).
    #[error("{0}")]
    Environment(String),
    /// A comparison found a regression (exit 5).
    #[error("{0}")]
    Regression(String),
    /// Interrupted by a signal (exit 130).
    #[error("interrupted by {0}")]
    Interrupted(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            Error::Measurement(_) => 1,
            Error::Usage(_) => 2,
            Error::Privilege(_) => 3,
            Error::Environment(_) => 4,
            Error::Regression(_) => 5,
            Error::Interrupted(_) => 130,
        }
    }

    pub(crate) fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    pub fn measurement(msg: impl Into<String>) -> Self {
        Error::Measurement(msg.into())
    }

    pub(crate) fn environment(msg: impl Into<String>) -> Self {
        Error::Environment(msg.into())
    }

    pub(crate) fn privilege(msg: impl Into<String>) -> Self {
        Error::Privilege(msg.into())
    }

    /// Classify an I/O error on `path` while doing `what`: space and read-only
    /// problems are environment errors, permission problems privilege errors,
    /// everything else a failed measurement.
    pub(crate) fn io(what: &str, path: &Path, e: io::Error) -> Self {
        let msg = format!("{what} {}: {e}", path.display());
        match Errno::from_io_error(&e) {
            Some(Errno::NOSPC) | Some(Errno::DQUOT) => Error::Environment(format!(
                "{msg} (the target file system is full: free space or choose another --target)"
            )),
            Some(Errno::ROFS) => Error::Environment(format!(
                "{msg} (the target is read-only: choose a writable --target)"
            )),
            // As root, EACCES/EPERM is the file system refusing (sysfs,
            // procfs, an immutable file): running as root cannot help.
            Some(Errno::ACCESS) | Some(Errno::PERM) if rustix::process::geteuid().is_root() => {
                Error::Environment(format!(
                    "{msg} (refused even to root: /proc, /sys and similar file systems \
                     hold no files of yours; choose a directory on a disk)"
                ))
            }
            Some(Errno::ACCESS) | Some(Errno::PERM) => Error::Privilege(format!(
                "{msg} (permission denied: choose a directory you can write, or run as root)"
            )),
            Some(Errno::FBIG) => Error::Environment(format!(
                "{msg} (the file size limit, ulimit -f, is below what this run writes: \
                 raise it (ulimit -f unlimited) or use a smaller size)"
            )),
            Some(Errno::MFILE) | Some(Errno::NFILE) => Error::Environment(format!(
                "{msg} (too many open files: raise the limit, ulimit -n)"
            )),
            Some(Errno::NOENT) => Error::Environment(format!("{msg} (it does not exist)")),
            _ => Error::Measurement(msg),
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        Error::Environment(format!("result database: {e}"))
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Measurement(format!("JSON: {e}"))
    }
}
