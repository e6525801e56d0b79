//! The background load `io.stream` can run against (`load=cpu|memory|io`):
//! threads started before a trial and joined after it, so a stream's
//! deadlines are measured under a known competing load.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::safety::AlignedBuf;
use crate::{Error, Result};

/// Which load runs beside the streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    None,
    Cpu,
    Memory,
    Io,
}

impl Load {
    pub(crate) const CHOICES: &'static [&'static str] = &["none", "cpu", "memory", "io"];
    pub(crate) fn parse(s: &str) -> Load {
        match s {
            "cpu" => Load::Cpu,
            "memory" => Load::Memory,
            "io" => Load::Io,
            _ => Load::None,
        }
    }
}

/// Size of the memory-load buffer: 256 MiB, or half the memory budget
/// (MemAvailable and the memory cgroup, `system::limits`) when that is
/// smaller.
fn memory_load_bytes() -> usize {
    let cap = 256usize << 20;
    crate::system::limits::MemoryLimits::read()
        .budget()
        .map(|b| (b / 2) as usize)
        .unwrap_or(cap)
        .clamp(4 << 20, cap)
}

/// Bytes the io load cycles through in its scratch file.
pub(crate) const IO_LOAD_SPAN: u64 = 64 << 20;

/// Background load threads, started before a trial and stopped (joined)
/// after it, or when dropped.
pub(crate) struct BackgroundLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl BackgroundLoad {
    /// Start `kind`: cpu = one spinning thread per online CPU; memory = one
    /// thread writing a byte per 64-byte line over a large buffer, again and
    /// again; io = one thread rewriting 1 MiB blocks of `io_file` (cycling
    /// over 64 MiB) with fdatasync every 8 MiB.
    pub(crate) fn start(kind: Load, io_file: Option<&File>) -> Result<BackgroundLoad> {
        let mut load = BackgroundLoad {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        match kind {
            Load::None => {}
            Load::Cpu => {
                let n = std::thread::available_parallelism().map_or(1, |n| n.get());
                for _ in 0..n {
                    let mut x = 1u64;
                    load.spawn("load-cpu", move |_| {
                        for _ in 0..100_000 {
                            x = std::hint::black_box(
                                x.wrapping_mul(6364136223846793005).wrapping_add(1),
                            );
                        }
                        true
                    })?;
                }
            }
            Load::Memory => {
                let mut buf = vec![0u8; memory_load_bytes()];
                let mut v = 0u8;
                load.spawn("load-memory", move |stop| {
                    v = v.wrapping_add(1);
                    for chunk in buf.chunks_mut(1 << 20) {
                        for line in chunk.iter_mut().step_by(64) {
                            *line = v;
                        }
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                    std::hint::black_box(&buf);
                    true
                })?;
            }
            Load::Io => {
                let f = io_file
                    .ok_or_else(|| Error::measurement("internal: io load without a file"))?
                    .try_clone()
                    .map_err(|e| Error::environment(format!("cannot duplicate a file: {e}")))?;
                let buf = AlignedBuf::random(1 << 20, 99)?;
                let mut off = 0u64;
                // A failed write or sync ends the load, not the trial.
                load.spawn("load-io", move |_| {
                    if f.write_all_at(buf.as_slice(), off).is_err() {
                        return false;
                    }
                    off = (off + (1 << 20)) % IO_LOAD_SPAN;
                    !(off.is_multiple_of(8 << 20) && f.sync_data().is_err())
                })?;
            }
        }
        Ok(load)
    }

    /// A thread `name` repeating `step` until the load stops or `step`
    /// answers false (`step` sees the stop flag to leave a long step early).
    fn spawn(
        &mut self,
        name: &str,
        mut step: impl FnMut(&AtomicBool) -> bool + Send + 'static,
    ) -> Result<()> {
        let stop = self.stop.clone();
        let t = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || while !stop.load(Ordering::Relaxed) && step(&stop) {})
            .map_err(|e| Error::environment(format!("cannot start a load thread: {e}")))?;
        self.threads.push(t);
        Ok(())
    }
}

impl Drop for BackgroundLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
