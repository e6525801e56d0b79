//! What the flash experiments share: the I/O they take their reads and
//! writes through (`FlashIo`, so a simulated card with a virtual clock can
//! stand in for a file or a block device in tests), the read-timing search
//! for unit boundaries (`boundary`) and the sustained writer with its
//! steady-state rule (`steady`) and the open-unit count (`streams`), and the fake-capacity fill and verify
//! (`capacity`).

pub mod boundary;
pub(crate) mod capacity;
pub(crate) mod device;
pub mod steady;
pub mod streams;

use crate::Result;

/// Positioned I/O on one file or device, timed by the clock it brings: a
/// real fd uses the monotonic clock, the test simulator its virtual one.
pub trait FlashIo {
    /// Bytes addressable from offset 0.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> Result<()>;
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<()>;
    /// Wait until the device holds what was written (fdatasync).
    fn flush(&mut self) -> Result<()>;
    /// Seconds since an arbitrary origin.
    fn now(&self) -> f64;
}

/// Called between operations so SIGINT stops a long run promptly.
pub(crate) type Cancel<'a> = &'a dyn Fn() -> Result<()>;
