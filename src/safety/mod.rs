//! Safety by construction: a private scratch directory, signal-driven
//! cancellation with cleanup on every exit path, aligned data buffers.

pub mod buffer;
pub mod child;
pub mod journal;
pub mod nofollow;
pub mod rlimits;
pub mod scratch;
pub mod scratch_name;
pub mod signals;
pub mod sysmount;

pub use buffer::AlignedBuf;
pub use scratch::Scratch;

/// Start the signal thread, with the journal's restore on its emergency
/// path (a second SIGINT/SIGTERM/SIGHUP); SIGXFSZ is ignored (see rlimits).
pub fn install_signal_handlers() {
    rlimits::ignore_sigxfsz();
    signals::on_emergency_restore(journal::restore_mine);
    signals::install();
}

/// True when running with effective uid 0.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The one root check: `Ok` as root, else the privilege error (exit 3)
/// whose text `why` gives (what needs root and how to get it).
pub fn require_root(why: impl FnOnce() -> String) -> crate::Result<()> {
    if is_root() {
        return Ok(());
    }
    Err(crate::Error::privilege(why()))
}
