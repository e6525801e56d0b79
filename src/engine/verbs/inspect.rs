//! `tunelab inspect [--target DIR]`: the machine's configuration facts with
//! their sources, with those of the target's file system and block device.

use std::path::{Path, PathBuf};

use crate::safety::scratch::{check_target, Use};
use crate::system::inspect::Facts;
use crate::Result;

/// The facts, each with where it was read, about `--target` (else the
/// current directory). Only read, so a read-only file system is fine.
pub(crate) fn facts(target: Option<&Path>) -> Result<Facts> {
    let target = target.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    check_target(&target, Use::Read)?;
    Ok(crate::system::inspect::inspect(Some(&target)))
}
