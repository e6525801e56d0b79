//! The sampler: one perf_event_open ring buffer per CPU (the kernel refuses
//! to mmap an inherited per-task event opened for all CPUs), a reader thread
//! that drains them and keeps only distinct stacks with counts, and
//! `finish`, which stops, symbolises and aggregates.

mod fitter;
mod holders;
mod leaf;
mod open;
mod pairing;
mod reader;
mod stacks;
mod windows;

use std::borrow::Cow;

use rustix::io::Errno;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use self::fitter::Adapt;
use self::open::{max_sample_rate, open_all, ring_data_bytes};
use self::reader::{read_loop, MAX_STACKS};
use super::aggregate::{self, Limits};
use super::collected::Collected;
use super::common::{self, explain};
use super::symbols;
use super::{Event, Request, Scope};
use crate::model::profile::{Profile, ProfileOverhead};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Cycles,
    CpuClock,
    CacheMisses,
    /// Every switch out of a task (the context-switches software event,
    /// fired at the same point as the sched:sched_switch tracepoint, with
    /// its call chain) plus SWITCH records for the switch back in: weights
    /// are µs blocked, not samples.
    OffCpu,
}

impl Kind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Cycles => "cycles",
            Kind::CpuClock => "cpu-clock",
            Kind::CacheMisses => "cache-misses",
            Kind::OffCpu => "off-cpu",
        }
    }
}

struct Meta {
    kind: Kind,
    event_reason: String,
    frequency_hz: u64,
    scope_words: String,
    kernel_included: bool,
    call_graph: bool,
    ring_bytes: u64,
}

impl Meta {
    /// The session's cost but its summary: `sampling_ms` taken when the
    /// reader stopped, symbolising since `cpu0` (thread CPU ns). What
    /// competes with the workload is the reader while sampling;
    /// symbolising runs after the workload's interval.
    fn overhead(
        &self,
        sampling_ms: f64,
        cpu0: u64,
        collected: &Collected,
        distinct_stacks: u64,
    ) -> ProfileOverhead {
        let symbolise_cpu_ms = (common::thread_cpu_ns().saturating_sub(cpu0)) as f64 / 1e6;
        let reader_cpu_ms = collected.reader_cpu_ns as f64 / 1e6;
        let pct = if sampling_ms > 0.0 {
            reader_cpu_ms * 100.0 / sampling_ms
        } else {
            0.0
        };
        ProfileOverhead {
            summary: String::new(),
            interval_ms: sampling_ms,
            reader_cpu_ms,
            symbolise_cpu_ms,
            cpu_percent_of_one_cpu: pct,
            ring_bytes: self.ring_bytes,
            distinct_stacks,
        }
    }

    /// The profile of an on-CPU or off-CPU session: what was opened, what
    /// the reader collected, and its aggregation.
    fn profile(
        &self,
        frequency_hz: u64,
        agg: aggregate::Aggregated,
        collected: &Collected,
        overhead: ProfileOverhead,
    ) -> Profile {
        Profile {
            event: self.kind.name().to_string(),
            event_reason: self.event_reason.clone(),
            frequency_hz,
            samples: agg.samples,
            user_samples: agg.user_samples,
            kernel_samples: agg.kernel_samples,
            lost: collected.lost,
            symbols: agg.symbols,
            callgraph: agg.callgraph,
            folded: agg.folded,
            scope: self.scope_words.clone(),
            kernel_included: self.kernel_included,
            call_graph: self.call_graph,
            throttled: collected.throttled,
            overhead,
        }
    }
}

pub(crate) struct Live {
    stop: Arc<AtomicBool>,
    /// Written once to wake the reader at stop (it sleeps until a buffer
    /// is half full or this: no periodic wake-ups while the workload runs).
    wake: std::os::fd::OwnedFd,
    reader: Option<JoinHandle<Collected>>,
    started: Instant,
    meta: Meta,
    /// Set by `stop`: what the reader collected, and the sampling time, ms.
    stopped: Option<(Collected, f64)>,
}

/// Kernel names of sampled addresses (see `kallsyms`).
pub(crate) type Names = std::collections::HashMap<u64, super::kallsyms::KernelSym>;

impl Live {
    pub(crate) fn start(
        req: &Request,
        pace: Option<Arc<crate::diagnose::budget::Pace>>,
    ) -> Result<Live, String> {
        let started = Instant::now();
        if let Scope::Process { pid } = req.scope {
            if pid <= 0 {
                return Err(format!("invalid pid {pid}"));
            }
        }
        let mut reasons: Vec<String> = Vec::new();
        let mut freq = req.frequency_hz.max(1);
        if let Some(max) = max_sample_rate() {
            if freq > max {
                reasons.push(format!(
                    "{freq} Hz asked, clamped to kernel.perf_event_max_sample_rate={max}"
                ));
                freq = max;
            }
        }
        let mut kind = match req.event {
            Event::Auto => Kind::Cycles,
            Event::CacheMisses => Kind::CacheMisses,
            Event::OffCpu => Kind::OffCpu,
        };
        if kind == Kind::OffCpu && req.scope == Scope::System {
            return Err(
                "off-CPU tracing follows one process tree (every switch of the whole machine \
                 would cost more than it shows): the sampled wchan table is used"
                    .into(),
            );
        }
        let mut include_kernel = true;
        let opened = loop {
            match open_all(kind, req, freq, include_kernel) {
                Ok(o) => break o,
                Err(e) => {
                    let errno = Errno::from_raw_os_error(e.raw_os_error().unwrap_or(0));
                    let unsupported =
                        matches!(errno, Errno::NOENT | Errno::OPNOTSUPP | Errno::NODEV);
                    let denied = matches!(errno, Errno::ACCESS | Errno::PERM);
                    if kind == Kind::Cycles && unsupported {
                        reasons.insert(
                            0,
                            format!(
                                "no hardware cycles event ({e}; {}): sampling the cpu-clock software event",
                                common::pmu_words()
                            ),
                        );
                        kind = Kind::CpuClock;
                    } else if denied && include_kernel && matches!(req.scope, Scope::Process { .. })
                    {
                        // paranoid=2 still allows user-space profiling of
                        // one's own processes: better than nothing.
                        reasons.push(format!(
                            "kernel excluded: {}",
                            explain(&e, "kernel samples", &req.scope)
                        ));
                        include_kernel = false;
                    } else {
                        return Err(explain(&e, kind.name(), &req.scope));
                    }
                }
            }
        };
        if kind == Kind::Cycles {
            reasons.insert(0, format!("hardware cycles ({})", common::pmu_words()));
        }
        let ncpus = common::online_cpus().len();
        let page = rustix::param::page_size().max(4096);
        let ring_bytes = (opened.samplers.len() * (ring_data_bytes(ncpus) + page)) as u64;
        let meta = Meta {
            kind,
            event_reason: reasons.join("; "),
            frequency_hz: freq,
            scope_words: common::scope_words(&req.scope, ncpus),
            kernel_included: include_kernel,
            call_graph: req.call_graph,
            ring_bytes,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let scope = req.scope;
        let off = kind == Kind::OffCpu;
        let own_until_exec = req.own_until_exec;
        let adapt = (!off && req.budget_share > 0.0).then_some(Adapt {
            share: req.budget_share,
            hz: freq,
            max_hz: freq,
        });
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let (wake_r, wake) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
            .map_err(|e| format!("cannot create the profile reader's pipe: {e}"))?;
        // One name per reader, so tunelab's own CPU by thread tells them apart.
        let name = match kind {
            Kind::OffCpu => "tunelab-offcpu",
            Kind::CacheMisses => "tunelab-cache",
            Kind::Cycles | Kind::CpuClock => "tunelab-profile",
        };
        let reader = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let wake = reader::Wake {
                    fd: wake_r,
                    ready: ready_tx,
                    pace,
                };
                read_loop(opened, &stop2, scope, own_until_exec, off, adapt, wake)
            })
            .map_err(|e| format!("cannot start the profile reader thread: {e}"))?;
        // Its set-up (the target's mappings and name) is done before a
        // command is released: not in the interval. Bounded wait.
        let _ = ready.recv_timeout(std::time::Duration::from_secs(10));
        Ok(Live {
            stop,
            wake,
            reader: Some(reader),
            started,
            meta,
            stopped: None,
        })
    }

    /// Stop sampling (the reader drains and exits); naming comes later.
    pub(crate) fn stop(&mut self) -> Result<(), String> {
        if self.stopped.is_none() {
            let what = if self.meta.kind == Kind::OffCpu {
                "off-CPU"
            } else {
                "profile"
            };
            let c = self.stop_reader(what)?;
            self.stopped = Some((c, self.started.elapsed().as_secs_f64() * 1e3));
        }
        Ok(())
    }

    /// The kernel addresses sampled (after `stop`).
    pub(crate) fn kernel_addrs(&self) -> Vec<u64> {
        self.stopped
            .as_ref()
            .map(|(c, _)| symbols::kernel_addrs(c).collect())
            .unwrap_or_default()
    }

    /// What the reader collected (stopping it first if need be), the
    /// sampling time, ms, and the kernel names given or read for it alone.
    fn take<'n>(
        &mut self,
        names: Option<&'n Names>,
    ) -> Result<(Collected, f64, Cow<'n, Names>), String> {
        self.stop()?;
        let (c, ms) = self
            .stopped
            .take()
            .ok_or_else(|| "the profile was already finished".to_string())?;
        let names = match names {
            Some(n) => Cow::Borrowed(n),
            None => Cow::Owned(own_names(&c)),
        };
        Ok((c, ms, names))
    }

    /// Off-CPU tracing: the µs-weighted profile (for the flame graph and
    /// the blocked-time tables) and every distinct wait stack with its
    /// count and longest wait.
    pub(crate) fn finish_offcpu(
        mut self,
        names: Option<&Names>,
    ) -> Result<super::OffCpuTrace, String> {
        let cpu0 = common::thread_cpu_ns();
        let (collected, sampling_ms, names) = self.take(names)?;
        let stacks = symbols::resolve(&collected, &names);
        // Ended early (held to the budget): times scaled to the span.
        let scale = windows::scale(collected.traced_ns, collected.span_ns);
        // resolve keeps the map's iteration order.
        let waits: Vec<super::WaitStack> = collected
            .stacks
            .keys()
            .zip(&stacks)
            .map(|(k, st)| {
                let w = collected.waits.get(k).copied().unwrap_or_default();
                super::WaitStack {
                    comm: st.comm.clone(),
                    frames: st
                        .frames
                        .iter()
                        .map(|f| (f.image.clone(), f.symbol.clone()))
                        .collect(),
                    total_s: st.samples as f64 * 1e-6 * scale,
                    count: w.count,
                    max_s: w.max_ns as f64 * 1e-9,
                    min_s: w.min_ns as f64 * 1e-9,
                    tids: collected.wait_tids.get(k).cloned().unwrap_or_default(),
                    by_pid: collected
                        .wait_pid_ns
                        .get(k)
                        .map(|m| {
                            m.iter()
                                .map(|(p, ns)| (*p, *ns as f64 * 1e-9 * scale))
                                .collect()
                        })
                        .unwrap_or_default(),
                }
            })
            .collect();
        let agg = aggregate::aggregate(&stacks, Limits::default());
        let m = &self.meta;
        let mut overhead = m.overhead(sampling_ms, cpu0, &collected, collected.stacks.len() as u64);
        let switches: u64 = collected.waits.values().map(|w| w.count).sum();
        overhead.summary = format!(
            "while tracing {:.0} ms, the reader used {:.1} ms CPU ({:.2}% of one CPU) for {} \
             blocking switches; symbolising {} distinct stacks took {:.1} ms CPU; {} KiB ring \
             buffers; {} records lost{}",
            sampling_ms,
            overhead.reader_cpu_ms,
            overhead.cpu_percent_of_one_cpu,
            switches,
            collected.stacks.len(),
            overhead.symbolise_cpu_ms,
            m.ring_bytes / 1024,
            collected.lost,
            if collected.errors.is_empty() {
                String::new()
            } else {
                format!(", {} unreadable records", collected.errors.len())
            }
        );
        let runqueue = collected
            .runqueue_ns
            .iter()
            .map(|(c, ns)| {
                (
                    collected
                        .comms
                        .get(*c as usize)
                        .cloned()
                        .unwrap_or_default(),
                    *ns as f64 * 1e-9 * scale,
                )
            })
            .collect();
        Ok(super::OffCpuTrace {
            profile: m.profile(0, agg, &collected, overhead),
            waits,
            runqueue,
            // Scaled too: a thread's waits are judged against its lifetime.
            lifetimes: collected
                .lifetimes_ns
                .iter()
                .map(|(t, ns)| (*t, *ns as f64 * 1e-9 * scale))
                .collect(),
            runqueue_by_pid: collected
                .runqueue_pid_ns
                .iter()
                .map(|(p, ns)| (*p, *ns as f64 * 1e-9 * scale))
                .collect(),
            tid_pid: collected.tid_pid.clone(),
            pid_comm: collected
                .pid_comm
                .iter()
                .map(|(p, c)| {
                    let name = collected.comms.get(*c as usize).cloned();
                    (*p, name.unwrap_or_default())
                })
                .collect(),
            open_at_end: collected.open_at_end,
            lost: collected.lost,
            holders: collected
                .holders_ns
                .iter()
                .map(|((w, h), ns)| {
                    let name = collected
                        .holder_comm
                        .get(h)
                        .and_then(|c| collected.comms.get(*c as usize));
                    (
                        *w,
                        *h,
                        name.cloned().unwrap_or_else(|| format!("[pid {h}]")),
                        *ns as f64 * 1e-9 * scale,
                    )
                })
                .collect(),
            holders_open: collected.holders_open.clone(),
            observer_pid: std::process::id(),
            traced_s: collected.traced_ns as f64 * 1e-9,
            span_s: collected.span_ns as f64 * 1e-9,
            ended_early: collected.ended_early,
        })
    }

    /// Stop the reader thread and take what it collected.
    fn stop_reader(&mut self, what: &str) -> Result<Collected, String> {
        self.wake_reader();
        self.reader
            .take()
            .ok_or_else(|| format!("the {what} reader was already stopped"))?
            .join()
            .map_err(|_| format!("the {what} reader thread panicked"))
    }

    /// Ask the reader to drain and end, waking it from its poll.
    fn wake_reader(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = rustix::io::write(&self.wake, b"s");
    }

    pub(crate) fn finish(mut self, names: Option<&Names>) -> Result<Profile, String> {
        let cpu0 = common::thread_cpu_ns();
        let (collected, sampling_ms, names) = self.take(names)?;
        let distinct = collected.stacks.len() as u64;
        let stacks = symbols::resolve(&collected, &names);
        let agg = aggregate::aggregate(&stacks, Limits::default());
        let m = &self.meta;
        let mut overhead = m.overhead(sampling_ms, cpu0, &collected, distinct);
        let mut summary = format!(
            "while sampling {:.0} ms, the reader used {:.1} ms CPU ({:.2}% of one CPU) for {} samples; \
             afterwards symbolising {} distinct stacks took {:.1} ms CPU; {} KiB ring buffers; \
             {} samples lost, {} throttled (kernel-side sampling cost is not included: \
             see bench/profile_vs_perf.sh)",
            sampling_ms,
            overhead.reader_cpu_ms,
            overhead.cpu_percent_of_one_cpu,
            agg.samples,
            distinct,
            overhead.symbolise_cpu_ms,
            m.ring_bytes / 1024,
            collected.lost,
            collected.throttled
        );
        if let (Some(first), Some(last)) = (collected.rates.first(), collected.rates.last()) {
            if collected.rates.len() > 1 {
                let low = collected.rates.iter().min().unwrap_or(last);
                summary.push_str(&format!(
                    "; the rate fitted the reader's CPU budget: {first} Hz at the start, {low} Hz \
                     at the lowest, {last} Hz at the end"
                ));
            }
        }
        if collected.truncated > 0 {
            summary.push_str(&format!(
                "; {} samples kept only their leaf frame (over {MAX_STACKS} distinct stacks)",
                collected.truncated
            ));
        }
        if collected.own_samples > 0 {
            summary.push_str(&format!(
                "; {} samples of tunelab itself left out",
                collected.own_samples
            ));
        }
        if !collected.errors.is_empty() {
            summary.push_str(&format!("; {} unreadable records", collected.errors.len()));
        }
        overhead.summary = summary;
        let hz = collected.rates.last().copied().unwrap_or(m.frequency_hz);
        Ok(m.profile(hz, agg, &collected, overhead))
    }
}

/// A lone profile's kernel names, read for it alone.
fn own_names(c: &Collected) -> Names {
    let addrs: Vec<u64> = symbols::kernel_addrs(c).collect();
    super::kallsyms::resolve(&addrs)
}

impl Drop for Live {
    fn drop(&mut self) {
        // Dropped without finish (an error path): stop the reader.
        self.wake_reader();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}
