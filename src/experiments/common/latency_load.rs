//! The load mix `sched.latency` measures under (`-p load=…`), started
//! before and stopped after each trial, built from tunelab's own work:
//!
//! - `messaging`: `sched.messaging` itself (hackbench: 1 group of 10
//!   sender/receiver pairs, 100 messages of 100 B each way, repeated), run
//!   as a separate tunelab process (`/proc/self/exe run sched.messaging`) so
//!   its forks never write-protect the measuring threads' pages;
//! - `storage`: the recorder's pattern: one thread writing 256 KiB blocks of
//!   random data through the page cache into a scratch file (wrapping at its
//!   size), fdatasync every 4 MiB so the device really writes;
//! - `memory`: one thread copying between two buffers (`mem.bandwidth
//!   kernel=copy`), larger than the caches.
//!
//! Load threads run SCHED_OTHER and are named (`tl-load-write`,
//! `tl-load-mem`), so a spike they cause is attributed to them by name.
//!
//! libc: prctl, PR_SET_PDEATHSIG, SIGKILL, c_ulong (between fork and exec: async-signal-safe)

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::safety::AlignedBuf;
use crate::units::format_size;
use crate::{Error, Result};

pub(crate) const KINDS: &[&str] = &["messaging", "storage", "memory"];
const WRITE_BLOCK: usize = 256 << 10;
const SYNC_EVERY: u64 = 4 << 20;

/// Which loads, parsed from `none` or `a+b+c`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Mix {
    pub(crate) messaging: bool,
    pub(crate) storage: bool,
    pub(crate) memory: bool,
}

impl Mix {
    pub(crate) fn parse(s: &str) -> Result<Mix> {
        let mut m = Mix::default();
        if s == "none" {
            return Ok(m);
        }
        for part in s.split('+') {
            match part {
                "messaging" => m.messaging = true,
                "storage" => m.storage = true,
                "memory" => m.memory = true,
                "all" => {
                    m.messaging = true;
                    m.storage = true;
                    m.memory = true;
                }
                _ => {
                    return Err(Error::usage(format!(
                        "sched.latency: load '{s}': '{part}' is not a load; use none or a \
                         '+'-joined mix of {} (or all), e.g. -p load=storage+memory",
                        KINDS.join(", ")
                    )))
                }
            }
        }
        Ok(m)
    }

    pub(crate) fn is_none(&self) -> bool {
        *self == Mix::default()
    }
}

/// Sizes chosen for the machine (board-sized), set once per point.
pub(crate) struct Sizes {
    /// Scratch file size the storage load wraps at.
    pub(crate) file: u64,
    /// Each of the two memory-load buffers.
    pub(crate) mem: usize,
}

impl Sizes {
    /// 32 MiB file and 2 x 16 MiB buffers, less on a small machine: at
    /// most a quarter of the free space and an eighth of the memory budget.
    pub(crate) fn fit(disk_free: Option<u64>, memory: Option<u64>) -> Sizes {
        let file = disk_free.map_or(32 << 20, |f| (f / 4).min(32 << 20)) / WRITE_BLOCK as u64
            * WRITE_BLOCK as u64;
        let mem = memory.map_or(16 << 20, |m| (m / 16).min(16 << 20)) as usize / 4096 * 4096;
        Sizes {
            file: file.max(WRITE_BLOCK as u64),
            mem: mem.max(64 << 10),
        }
    }
}

/// A running load mix; `stop` ends it and says what it did.
pub(crate) struct Running {
    stop: Arc<AtomicBool>,
    threads: Vec<(&'static str, JoinHandle<Result<u64>>)>,
    messaging: Option<Child>,
}

impl Running {
    /// Start `mix`; `file` is the scratch file for the storage load.
    pub(crate) fn start(mix: &Mix, sizes: &Sizes, file: Option<&File>) -> Result<Running> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut r = Running {
            stop: stop.clone(),
            threads: Vec::new(),
            messaging: None,
        };
        if mix.messaging {
            r.messaging = Some(spawn_messaging()?);
        }
        if mix.storage {
            let f = file
                .ok_or_else(|| Error::measurement("internal: storage load without its file"))?
                .try_clone()
                .map_err(|e| Error::environment(format!("storage load: {e}")))?;
            let (s, cap) = (stop.clone(), sizes.file);
            let buf = AlignedBuf::random(WRITE_BLOCK, 25)?;
            r.threads.push((
                "storage",
                spawn("tl-load-write", move || write_loop(&f, &buf, cap, &s))?,
            ));
        }
        if mix.memory {
            let (s, n) = (stop.clone(), sizes.mem);
            let mut a = AlignedBuf::random(n, 26)?;
            let b = AlignedBuf::random(n, 27)?;
            r.threads.push((
                "memory",
                spawn("tl-load-mem", move || {
                    let mut bytes = 0u64;
                    while !s.load(Ordering::Relaxed) {
                        a.as_mut_slice().copy_from_slice(b.as_slice());
                        std::hint::black_box(a.as_slice());
                        bytes += n as u64;
                    }
                    Ok(bytes)
                })?,
            ));
        }
        Ok(r)
    }

    /// Stop every load; a line per load saying what it did in the trial.
    pub(crate) fn stop(mut self) -> Result<Vec<String>> {
        self.stop.store(true, Ordering::Relaxed);
        let mut done = Vec::new();
        if let Some(mut c) = self.messaging.take() {
            let _ = c.kill();
            let st = c.wait().ok();
            // Killed by us is the normal end; an earlier exit is an error.
            if let Some(code) = st.and_then(|s| s.code()) {
                return Err(Error::measurement(format!(
                    "the messaging load (tunelab run sched.messaging) exited early with code \
                     {code}; run it alone to see why"
                )));
            }
            done.push("messaging: sched.messaging (1 group x 10 pairs) repeated".to_string());
        }
        for (what, h) in self.threads.drain(..) {
            let n = h
                .join()
                .map_err(|_| Error::measurement(format!("the {what} load thread panicked")))??;
            done.push(format!("{what}: {} moved", format_size(n)));
        }
        Ok(done)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(c) = &mut self.messaging {
            let _ = c.kill();
            let _ = c.wait();
        }
        for (_, h) in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

fn spawn<F>(name: &str, f: F) -> Result<JoinHandle<Result<u64>>>
where
    F: FnOnce() -> Result<u64> + Send + 'static,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| Error::environment(format!("cannot start the load thread {name}: {e}")))
}

/// Recorder-like writes: sequential blocks through the page cache,
/// wrapping at `cap`, fdatasync every [`SYNC_EVERY`]. Bytes written.
fn write_loop(f: &File, buf: &AlignedBuf, cap: u64, stop: &AtomicBool) -> Result<u64> {
    let written = AtomicU64::new(0);
    let (mut off, mut since_sync) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        f.write_all_at(buf.as_slice(), off)
            .map_err(|e| Error::environment(format!("storage load: write: {e}")))?;
        off = (off + WRITE_BLOCK as u64) % cap;
        since_sync += WRITE_BLOCK as u64;
        written.fetch_add(WRITE_BLOCK as u64, Ordering::Relaxed);
        if since_sync >= SYNC_EVERY {
            f.sync_data()
                .map_err(|e| Error::environment(format!("storage load: fdatasync: {e}")))?;
            since_sync = 0;
        }
    }
    Ok(written.load(Ordering::Relaxed))
}

/// `tunelab run sched.messaging` repeating until killed.
fn spawn_messaging() -> Result<Child> {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(crate::system::proc::SELF_EXE);
    c.args([
        "run",
        "sched.messaging",
        "-p",
        "groups=1",
        "-p",
        "pairs=10",
        "-p",
        "loops=100",
        "--warmup",
        "0",
        "--min-trials",
        "100000",
        "--max-trials",
        "100000",
        "--budget",
        "86400",
        "--quiet-check",
        "0",
        "--no-store",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    // SAFETY: prctl is async-signal-safe; the load dies with tunelab.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            Ok(())
        });
    }
    c.spawn()
        .map_err(|e| Error::environment(format!("cannot start the messaging load: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_parses_and_refuses_unknown_loads() {
        assert!(Mix::parse("none").unwrap().is_none());
        let m = Mix::parse("storage+memory").unwrap();
        assert!(m.storage && m.memory && !m.messaging);
        assert_eq!(
            Mix::parse("all").unwrap(),
            Mix {
                messaging: true,
                storage: true,
                memory: true
            }
        );
        let e = Mix::parse("storage+disk").unwrap_err().to_string();
        assert!(e.contains("'disk'") && e.contains("messaging"), "{e}");
    }

    #[test]
    fn sizes_follow_a_small_board() {
        let s = Sizes::fit(Some(20 << 20), Some(32 << 20));
        assert_eq!(s.file, 5 << 20);
        assert_eq!(s.mem, 2 << 20);
        let big = Sizes::fit(None, None);
        assert_eq!((big.file, big.mem), (32 << 20, 16 << 20));
    }
}
