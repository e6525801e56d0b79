//! `tunelab inspect [--target DIR]`: the machine's configuration facts with
//! their sources, with those of the target's file system and block device.
//! [`plan`] checks the target (for reading only); [`Planned::measure`]
//! reads the facts.

use std::path::{Path, PathBuf};

use crate::safety::scratch::{check_target, Use};
use crate::system::inspect::Facts;
use crate::Result;

/// The target checked, nothing read yet.
pub(crate) struct Planned {
    target: PathBuf,
}

/// Check `--target` (else the current directory). Only read, so a
/// read-only file system is fine.
pub(crate) fn plan(target: Option<&Path>) -> Result<Planned> {
    let target = target.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    check_target(&target, Use::Read)?;
    Ok(Planned { target })
}

impl Planned {
    /// The facts, each with where it was read, about the target.
    pub(crate) fn measure(&self) -> Facts {
        crate::system::inspect::inspect(Some(&self.target))
    }
}
