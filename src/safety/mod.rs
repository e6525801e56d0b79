//! Safety by construction: a private scratch directory, signal-driven
//! cancellation with cleanup on every exit path, aligned data buffers.

pub mod buffer;
pub mod journal;
pub mod scratch;
pub mod signals;
pub mod sysmount;

pub use buffer::AlignedBuf;
pub use scratch::Scratch;

/// True when running with effective uid 0.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
