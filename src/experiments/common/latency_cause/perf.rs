//! The `perf-switch` method: per measured CPU, a CPU-wide
//! `perf_event_open` dummy event with `context_switch` records in a mapped
//! ring, kept as a history of switches, and the time each task held the CPU
//! in an interval.
//!
//! libc: syscall, SYS_perf_event_open, pid_t, c_int, c_ulong (rustix has no perf_event_open)

use std::collections::{BTreeMap, VecDeque};
use std::os::fd::{FromRawFd, OwnedFd};

use rustix::io::Errno;
use rustix::ioctl::{NoArg, Opcode};
use std::sync::atomic::{AtomicU64, Ordering};

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const SAMPLE_TID: u64 = 1 << 1;
const SAMPLE_TIME: u64 = 1 << 2;
const SAMPLE_CPU: u64 = 1 << 7;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
const FLAG_CONTEXT_SWITCH: u64 = 1 << 26;
const RECORD_LOST: u32 = 2;
const RECORD_SWITCH_CPU_WIDE: u32 = 15;
const MISC_SWITCH_OUT: u16 = 0x2000;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
pub(super) const IOC_ENABLE: Opcode = 0x2400;
pub(super) const IOC_DISABLE: Opcode = 0x2401;
/// Data pages per CPU ring (2^n): 256 KiB, ~6000 switches between polls.
const RING_PAGES: usize = 64;
/// Switches kept per CPU for spikes not yet explained.
const HISTORY: usize = 65_536;

/// perf_event_attr up to PERF_ATTR_SIZE_VER5 (112 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved2: u16,
}

/// One context switch on a CPU: at `t`, `prev` gave the CPU to `next`
/// (tids; 0 is the idle task).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Switch {
    pub(crate) t: u64,
    pub(crate) prev: u32,
    pub(crate) next: u32,
    pub(crate) next_pid: u32,
}

pub(super) struct PerfCpu {
    pub(super) fd: OwnedFd,
    pub(super) base: *mut u8,
    pub(super) len: usize,
    pub(super) page: usize,
    pub(super) history: VecDeque<Switch>,
    pub(super) lost: u64,
}

// SAFETY: the mapping is owned by this struct and used by one thread at a time.
unsafe impl Send for PerfCpu {}

impl PerfCpu {
    pub(super) fn open(cpu: usize) -> Result<PerfCpu, String> {
        let attr = PerfAttr {
            type_: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfAttr>() as u32,
            config: PERF_COUNT_SW_DUMMY,
            sample_period: 1,
            sample_type: SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU,
            flags: FLAG_DISABLED | FLAG_SAMPLE_ID_ALL | FLAG_USE_CLOCKID | FLAG_CONTEXT_SWITCH,
            clockid: rustix::time::ClockId::Monotonic as i32,
            ..PerfAttr::default()
        };
        // SAFETY: a valid attr; pid -1 with a cpu is a CPU-wide event.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfAttr,
                -1 as libc::pid_t,
                cpu as libc::c_int,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        } as libc::c_int;
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match Errno::from_io_error(&e) {
                Some(Errno::ACCESS) | Some(Errno::PERM) => format!(
                    "perf_event_open on CPU {cpu}: {e} (needs root/CAP_PERFMON or \
                     kernel.perf_event_paranoid <= 0)"
                ),
                Some(Errno::NOENT) | Some(Errno::NOSYS) | Some(Errno::OPNOTSUPP) => {
                    format!("perf_event_open on CPU {cpu}: {e} (kernel without perf events)")
                }
                _ => format!("perf_event_open on CPU {cpu}: {e}"),
            });
        }
        // SAFETY: a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let page = rustix::param::page_size();
        let len = page * (RING_PAGES + 1);
        use rustix::mm::{MapFlags, ProtFlags};
        // SAFETY: mapping the event's ring buffer read-write (we move the tail).
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }
        // The descriptor closes on return.
        .map_err(|e| format!("mmap of the perf ring on CPU {cpu}: {e}"))?;
        Ok(PerfCpu {
            fd,
            base: base as *mut u8,
            len,
            page,
            history: VecDeque::new(),
            lost: 0,
        })
    }

    pub(super) fn ioctl(&self, req: Opcode) {
        ioctl_fd(&self.fd, req);
    }

    /// Move every record out of the ring into the history.
    pub(super) fn drain(&mut self) {
        // SAFETY: the first page is the perf_event_mmap_page; data_head at
        // 1024, data_tail at 1032; the data area follows the first page.
        unsafe {
            let head_p = self.base.add(1024) as *const AtomicU64;
            let tail_p = self.base.add(1032) as *const AtomicU64;
            let head = (*head_p).load(Ordering::Acquire);
            let mut tail = (*tail_p).load(Ordering::Relaxed);
            let data = self.base.add(self.page);
            let size = (self.len - self.page) as u64;
            let mut rec = [0u8; 256];
            while tail < head {
                let at = |off: u64| *data.add(((tail + off) % size) as usize);
                let hdr: Vec<u8> = (0..8).map(at).collect();
                let typ = u32::from_ne_bytes(hdr[0..4].try_into().unwrap_or_default());
                let misc = u16::from_ne_bytes(hdr[4..6].try_into().unwrap_or_default());
                let sz = u16::from_ne_bytes(hdr[6..8].try_into().unwrap_or_default()) as u64;
                if sz < 8 {
                    break;
                }
                let n = (sz as usize).min(rec.len());
                for (i, b) in rec.iter_mut().enumerate().take(n) {
                    *b = at(i as u64);
                }
                self.record(typ, misc, &rec[..n]);
                tail += sz;
            }
            (*tail_p).store(tail, Ordering::Release);
        }
        while self.history.len() > HISTORY {
            self.history.pop_front();
        }
    }

    pub(super) fn record(&mut self, typ: u32, misc: u16, r: &[u8]) {
        let u32_at = |o: usize| {
            r.get(o..o + 4)
                .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or_default()))
        };
        let u64_at = |o: usize| {
            r.get(o..o + 8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or_default()))
        };
        match typ {
            RECORD_LOST => self.lost += u64_at(16).unwrap_or(0),
            // header(8) next_prev_pid next_prev_tid | sample_id: pid tid time cpu res
            RECORD_SWITCH_CPU_WIDE if misc & MISC_SWITCH_OUT != 0 => {
                let (Some(next_pid), Some(next), Some(prev), Some(t)) =
                    (u32_at(8), u32_at(12), u32_at(20), u64_at(24))
                else {
                    return;
                };
                self.history.push_back(Switch {
                    t,
                    prev,
                    next,
                    next_pid,
                });
            }
            _ => {}
        }
    }
}

/// PERF_EVENT_IOC_ENABLE or _DISABLE on a perf descriptor (or a duplicate
/// of one: both name the same event).
pub(super) fn ioctl_fd(fd: &OwnedFd, req: Opcode) {
    // SAFETY: enable/disable ioctls (no argument) on a perf descriptor.
    let _ = unsafe {
        if req == IOC_ENABLE {
            rustix::ioctl::ioctl(fd, NoArg::<IOC_ENABLE>::new())
        } else {
            rustix::ioctl::ioctl(fd, NoArg::<IOC_DISABLE>::new())
        }
    };
}

impl Drop for PerfCpu {
    fn drop(&mut self) {
        // SAFETY: unmapping what `open` mapped; the descriptor closes as
        // the OwnedFd drops.
        let _ = unsafe { rustix::mm::munmap(self.base.cast(), self.len) };
    }
}

/// Time each task held the CPU in `[from, to)`, from the switches (sorted):
/// (tid, pid, ns) longest first. The task running at `from` is the `next`
/// of the last switch before it; None when the history does not reach back.
pub(crate) fn occupancy(switches: &[Switch], from: u64, to: u64) -> Option<Vec<(u32, u32, u64)>> {
    let before = switches.iter().rposition(|s| s.t <= from)?;
    let mut cur = (switches[before].next, switches[before].next_pid);
    let mut since = from;
    let mut held: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    for s in &switches[before + 1..] {
        if s.t >= to {
            break;
        }
        *held.entry(cur).or_default() += s.t - since;
        cur = (s.next, s.next_pid);
        since = s.t;
    }
    *held.entry(cur).or_default() += to.saturating_sub(since);
    let mut v: Vec<(u32, u32, u64)> = held
        .into_iter()
        .filter(|(_, ns)| *ns > 0)
        .map(|((tid, pid), ns)| (tid, pid, ns))
        .collect();
    v.sort_by_key(|o| std::cmp::Reverse(o.2));
    Some(v)
}
