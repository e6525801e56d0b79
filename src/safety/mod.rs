//! Safety by construction: a private scratch directory, signal-driven
//! cancellation with cleanup on every exit path, aligned data buffers.

pub(crate) mod buffer;
pub(crate) mod child;
pub(crate) mod journal;
pub(crate) mod nofollow;
pub(crate) mod rlimits;
pub(crate) mod scratch;
pub(crate) mod scratch_name;
pub(crate) mod signals;
pub(crate) mod sysmount;

pub(crate) use buffer::AlignedBuf;
pub use scratch::Scratch;

/// Start the signal thread, with the journal's restore on its emergency
/// path (a second SIGINT/SIGTERM/SIGHUP); SIGXFSZ is ignored (see rlimits).
pub(crate) fn install_signal_handlers() {
    rlimits::ignore_sigxfsz();
    signals::on_emergency_restore(journal::restore_mine);
    signals::install();
}

/// True when running with effective uid 0.
pub(crate) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The one root check: `Ok` as root, else the privilege error (exit 3)
/// whose text `why` gives (what needs root and how to get it).
pub(crate) fn require_root(why: impl FnOnce() -> String) -> crate::Result<()> {
    if is_root() {
        return Ok(());
    }
    Err(crate::Error::privilege(why()))
}
