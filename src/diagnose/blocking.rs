//! Section 5, why tasks block: LatencyTOP's per-process records
//! (`/proc/PID/latency`, CONFIG_LATENCYTOP, switched on through the journal
//! as `kernel.latencytop`) when the kernel has them; otherwise every task in
//! scope is sampled (~100 Hz): its state, `wchan`, and for a process
//! (root) the caller from `/proc/PID/task/TID/stack`, giving the top causes
//! of off-CPU time per process by total and longest blocked time; plus
//! schedstat's on-CPU and waiting-for-a-CPU time.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::knob::Switched;
use super::offcpu::SLEEP_FRAMES;
use super::procs::{self, Scope};
use super::{overhead, thread_cpu_s, Sampled, Ticker};
use crate::model::diagnosis::{BlockCause, BlockingReport, SchedTime, Section};

/// Causes kept, by total blocked time.
pub(crate) const TOP: usize = 20;

// ------------------------------------------------------------- LatencyTOP

/// One LatencyTOP record: "count total_us max_us frame frame …".
pub(crate) fn parse_latency(text: &str) -> Vec<(u64, f64, f64, String)> {
    text.lines()
        .filter(|l| !l.starts_with("Latency Top"))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let count = w.next()?.parse().ok()?;
            let total: f64 = w.next()?.parse().ok()?;
            let max: f64 = w.next()?.parse().ok()?;
            let frames: Vec<&str> = w.filter(|f| !is_generic(f)).take(3).collect();
            let cause = if frames.is_empty() {
                "(no backtrace)".to_string()
            } else {
                frames.join(" ← ")
            };
            Some((count, total * 1e-6, max * 1e-6, cause))
        })
        .collect()
}

/// Scheduler entry points every sleep passes through: they name no cause.
fn is_generic(f: &str) -> bool {
    let name = f.split('+').next().unwrap_or(f);
    SLEEP_FRAMES.contains(&name)
        || matches!(name, "kthread" | "0")
        || name.starts_with("__x64_sys_")
        || name.starts_with("__arm64_sys_")
        || name.starts_with("el0")
        || name.starts_with("invoke_syscall")
}

/// LatencyTOP switched on; its per-process records read periodically so
/// processes that exit during the interval are not lost.
pub(crate) struct LatencySession {
    knob: Switched,
    ticker: Option<Ticker<LatencyReader>>,
    cpu_s: f64,
}

struct LatencyReader {
    root: PathBuf,
    scope: Scope,
    /// Last text read per process (the records only grow while it lives).
    last: BTreeMap<i32, (String, String)>,
}

impl Sampled for LatencyReader {
    fn sample(&mut self) {
        for (pid, comm) in procs::processes(&self.root, &self.scope) {
            if let Ok(t) = crate::system::proc::Root::under(&self.root).read_pid(pid, "latency") {
                self.last.insert(pid, (comm, t));
            }
        }
    }
}

impl LatencySession {
    /// Switch LatencyTOP on and clear it; Err is why not (the sampler is
    /// used instead).
    pub(crate) fn begin(
        root: &Path,
        scope: &Scope,
        pace: Option<std::sync::Arc<super::budget::Pace>>,
    ) -> Result<LatencySession, String> {
        let proc = crate::system::proc::Root::under(root);
        let knob = proc.sysctl_file("kernel.latencytop");
        if !knob.exists() {
            return Err(
                "no /proc/sys/kernel/latencytop: the kernel is built without CONFIG_LATENCYTOP"
                    .into(),
            );
        }
        let cpu0 = thread_cpu_s();
        let knob = Switched::on("kernel.latencytop", &knob, "1")?;
        // Any write clears the records.
        let _ = std::fs::write(proc.file("latency_stats"), "0");
        let reader = LatencyReader {
            root: root.to_path_buf(),
            scope: scope.clone(),
            last: BTreeMap::new(),
        };
        Ok(LatencySession {
            knob,
            ticker: Some(Ticker::adaptive(
                "latencytop",
                reader,
                std::time::Duration::from_millis(500),
                std::time::Duration::from_secs(2),
                super::budget::READER_SHARE,
                pace,
            )),
            cpu_s: thread_cpu_s() - cpu0,
        })
    }

    pub(crate) fn finish(mut self, interval: f64) -> Section<BlockingReport> {
        let (reader, cpu, n) = self.ticker.take().expect("started").stop();
        let cpu0 = thread_cpu_s();
        let restored = self.knob.restore();
        let mut causes = Vec::new();
        for (pid, (comm, text)) in &reader.last {
            for (count, total_s, max_s, cause) in parse_latency(text) {
                causes.push(BlockCause {
                    pid: *pid,
                    comm: comm.clone(),
                    processes: 1,
                    cause,
                    count,
                    max_s,
                    total_s,
                });
            }
        }
        sort_causes(&mut causes);
        let cpu = self.cpu_s + cpu + thread_cpu_s() - cpu0;
        Section::Present {
            data: BlockingReport {
                source: "latencytop".into(),
                causes,
                sched: Vec::new(),
                method: format!(
                    "kernel.latencytop switched on through the knob journal; /proc/PID/latency of \
                     each process in scope read every 0.5 s (times in µs from the kernel); {restored}"
                ),
            },
            overhead: overhead(cpu, interval, n, "reading /proc/PID/latency"),
        }
    }
}

fn sort_causes(c: &mut Vec<BlockCause>) {
    c.sort_by(|a, b| {
        b.total_s
            .total_cmp(&a.total_s)
            .then(b.max_s.total_cmp(&a.max_s))
    });
    c.truncate(TOP);
}

// ------------------------------------------------------------- sampling

/// The kernel function a sleeping task waits in ("0" or empty: none).
pub(crate) fn parse_wchan(text: &str) -> Option<String> {
    let t = text.trim();
    (!t.is_empty() && t != "0").then(|| t.to_string())
}

/// `/proc/PID/stack` → the first frames that name a cause.
pub(crate) fn parse_stack(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f = l.split_whitespace().nth(1)?;
            let name = f.split('+').next()?.to_string();
            (!is_generic(&name)).then_some(name)
        })
        .collect()
}

/// `/proc/PID/task/TID/schedstat`: (ns on CPU, ns waiting on a run queue).
pub(crate) fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut w = text.split_whitespace();
    Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
}

#[derive(Default)]
struct TaskTrack {
    pid: i32,
    /// The current blocked stretch: cause and seconds so far.
    stretch: Option<(String, f64)>,
    /// schedstat at first sight (zero for tasks born in the interval) and now.
    first: Option<(u64, u64)>,
    last: Option<(u64, u64)>,
    stack_age: u32,
    caller: Option<(String, String)>,
    /// schedstat's count of times on a CPU at the last sleeping sample: a
    /// change means the task ran in between, so a new wait began.
    slices: Option<u64>,
}

#[derive(Default)]
struct CauseAcc {
    seconds: f64,
    stretches: u64,
    max_seconds: f64,
}

pub(crate) struct Sampler {
    root: PathBuf,
    scope: Scope,
    hz: u32,
    ticks: u64,
    /// (pid, comm, tids), refreshed every few samples.
    procs: Vec<(i32, String, Vec<i32>)>,
    tasks: HashMap<i32, TaskTrack>,
    /// Tasks alive at the start: their schedstat baseline is their first reading.
    initial: Option<std::collections::HashSet<i32>>,
    causes: HashMap<(i32, String), CauseAcc>,
    comms: HashMap<i32, String>,
    stack_ok: bool,
    last_at: Option<std::time::Instant>,
    /// Seconds covered by samples (for the achieved rate).
    covered_s: f64,
    /// Sampling starts when this is set (a command's exec).
    gate: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Sampler {
    pub(crate) fn new(root: &Path, scope: Scope, hz: u32) -> Sampler {
        // A process's kernel stacks are root-only; the whole machine's are
        // too costly to read at this rate.
        let stack_ok = matches!(scope, Scope::Tree(_)) && crate::safety::is_root();
        Sampler {
            root: root.to_path_buf(),
            scope,
            hz,
            ticks: 0,
            procs: Vec::new(),
            tasks: HashMap::new(),
            initial: None,
            causes: HashMap::new(),
            comms: HashMap::new(),
            stack_ok,
            last_at: None,
            covered_s: 0.0,
            gate: None,
        }
    }

    /// Sample nothing until `gate` is set (the command's pre-exec
    /// handshake is tunelab's, not the workload's).
    pub(crate) fn gated(mut self, gate: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Sampler {
        self.gate = Some(gate);
        self
    }

    fn refresh(&mut self) {
        self.procs = procs::processes(&self.root, &self.scope)
            .into_iter()
            .map(|(pid, comm)| {
                let tids = procs::tasks(&self.root, pid);
                (pid, comm, tids)
            })
            .collect();
        for (pid, comm, _) in &self.procs {
            self.comms.insert(*pid, comm.clone());
        }
        if self.initial.is_none() {
            self.initial = Some(self.procs.iter().flat_map(|p| p.2.clone()).collect());
        }
    }

    fn close(&mut self, tid: i32) {
        if let Some(t) = self.tasks.get_mut(&tid) {
            if let Some((cause, n)) = t.stretch.take() {
                let acc = self.causes.entry((t.pid, cause)).or_default();
                acc.stretches += 1;
                acc.max_seconds = acc.max_seconds.max(n);
            }
        }
    }

    pub(crate) fn finish(
        mut self,
        interval: f64,
        cpu: f64,
        readings: u64,
    ) -> Section<BlockingReport> {
        let tids: Vec<i32> = self.tasks.keys().copied().collect();
        for t in tids {
            self.close(t);
        }
        // Same-named processes (a workload's workers) are summed.
        let mut by: HashMap<(String, String), BlockCause> = HashMap::new();
        let mut pids: HashMap<(String, String), std::collections::HashSet<i32>> = HashMap::new();
        for ((pid, cause), a) in &self.causes {
            let comm = self.comms.get(pid).cloned().unwrap_or_default();
            let key = (comm.clone(), cause.clone());
            pids.entry(key.clone()).or_default().insert(*pid);
            let e = by.entry(key).or_insert_with(|| BlockCause {
                pid: *pid,
                comm,
                processes: 0,
                cause: cause.clone(),
                ..Default::default()
            });
            e.pid = e.pid.min(*pid);
            e.count += a.stretches;
            e.max_s = e.max_s.max(a.max_seconds);
            e.total_s += a.seconds;
        }
        let mut causes: Vec<BlockCause> = by
            .into_iter()
            .map(|(k, mut c)| {
                c.processes = pids.get(&k).map_or(1, |s| s.len() as u32);
                c
            })
            .collect();
        sort_causes(&mut causes);
        type Acc = (SchedTime, std::collections::HashSet<i32>);
        let mut sched: HashMap<String, Acc> = HashMap::new();
        for t in self.tasks.values() {
            let (Some(first), Some(last)) = (t.first, t.last) else {
                continue;
            };
            let comm = self.comms.get(&t.pid).cloned().unwrap_or_default();
            let (s, set) = sched.entry(comm.clone()).or_insert_with(|| {
                (
                    SchedTime {
                        pid: t.pid,
                        comm,
                        ..Default::default()
                    },
                    Default::default(),
                )
            });
            set.insert(t.pid);
            s.pid = s.pid.min(t.pid);
            s.tasks += 1;
            s.run_s += last.0.saturating_sub(first.0) as f64 * 1e-9;
            s.runqueue_s += last.1.saturating_sub(first.1) as f64 * 1e-9;
        }
        let mut sched: Vec<SchedTime> = sched
            .into_values()
            .map(|(mut s, set)| {
                s.processes = set.len() as u32;
                s
            })
            .collect();
        sched.sort_by(|a, b| (b.run_s + b.runqueue_s).total_cmp(&(a.run_s + a.runqueue_s)));
        sched.truncate(TOP);
        let achieved = if self.covered_s > 0.0 {
            readings as f64 / self.covered_s.max(interval)
        } else {
            0.0
        };
        let what = match self.scope {
            Scope::System => "every task of the machine",
            Scope::Tree(_) => "every task of the process and its descendants",
        };
        Section::Present {
            data: BlockingReport {
                source: "sampled wchan/stack".into(),
                causes,
                sched,
                method: format!(
                    "{what} sampled at {} Hz planned, {:.0} Hz achieved ({readings} samples): a \
                     task found sleeping (S) or in uninterruptible sleep (D, marked [D]) is \
                     charged the time since the previous sample to the kernel function it waits \
                     in (/proc/…/wchan{}); max = longest stretch in one cause; same-named \
                     processes summed (×N); on-CPU and run-queue time from /proc/…/schedstat. \
                     A sampled estimate: stretches shorter than one sample period are missed or \
                     rounded up.",
                    self.hz,
                    achieved,
                    if self.stack_ok {
                        ", with its caller from /proc/…/stack"
                    } else {
                        ""
                    }
                ),
            },
            overhead: overhead(cpu, interval, readings, "the sampling thread"),
        }
    }
}

impl Sampled for Sampler {
    fn sample(&mut self) {
        // Charge the time since the previous sample: on a loaded machine the
        // thread falls behind its rate and a fixed 1/hz would under-count.
        let now = std::time::Instant::now();
        let dt = match self.last_at.replace(now) {
            Some(prev) => (now - prev).as_secs_f64(),
            None => 1.0 / self.hz as f64,
        };
        self.sample_at(dt);
    }
}

impl Sampler {
    /// One sample; sleeping tasks are charged `dt` seconds.
    pub(crate) fn sample_at(&mut self, dt: f64) {
        if let Some(g) = &self.gate {
            if !g.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
        }
        self.covered_s += dt;
        if self.ticks.is_multiple_of(10) {
            self.refresh();
        }
        let read_sched = self.ticks.is_multiple_of(10);
        self.ticks += 1;
        let procs = std::mem::take(&mut self.procs);
        let proc = crate::system::proc::Root::under(&self.root);
        for (pid, _, tids) in &procs {
            for &tid in tids {
                let task = |name: &str| proc.task_file(pid, tid, name);
                let Ok(stat) = std::fs::read_to_string(task("stat")) else {
                    self.close(tid);
                    continue;
                };
                let Some((_, state, _)) = procs::parse_stat(&stat) else {
                    continue;
                };
                let initial = self.initial.as_ref().is_some_and(|s| s.contains(&tid));
                let track = self.tasks.entry(tid).or_insert_with(|| TaskTrack {
                    pid: *pid,
                    first: (!initial).then_some((0, 0)),
                    ..Default::default()
                });
                if read_sched {
                    if let Some(v) = std::fs::read_to_string(task("schedstat"))
                        .ok()
                        .and_then(|t| parse_schedstat(&t))
                    {
                        track.first.get_or_insert(v);
                        track.last = Some(v);
                    }
                }
                if state != 'S' && state != 'D' {
                    self.close(tid);
                    if let Some(t) = self.tasks.get_mut(&tid) {
                        t.slices = None;
                    }
                    continue;
                }
                // Did it run since the last sample? Then this is a new wait,
                // even in the same place (1 ms sleeps are not one stretch).
                let slices = std::fs::read_to_string(task("schedstat"))
                    .ok()
                    .and_then(|t| t.split_whitespace().nth(2)?.parse::<u64>().ok());
                let track = self.tasks.get_mut(&tid).expect("inserted above");
                let ran = matches!((track.slices, slices), (Some(a), Some(b)) if a != b);
                track.slices = slices;
                if ran {
                    self.close(tid);
                }
                let wchan = std::fs::read_to_string(task("wchan"))
                    .ok()
                    .and_then(|t| parse_wchan(&t))
                    .unwrap_or_else(|| "(unknown)".into());
                let track = self.tasks.get_mut(&tid).expect("inserted above");
                let mut cause = wchan.clone();
                if self.stack_ok {
                    // The caller says more than the wait primitive; read the
                    // stack at most every 10th sample per task.
                    let cached = track.caller.as_ref().filter(|(w, _)| *w == wchan);
                    if cached.is_none() && track.stack_age == 0 {
                        if let Ok(st) = std::fs::read_to_string(task("stack")) {
                            let frames = parse_stack(&st);
                            let caller = frames.iter().find(|f| **f != wchan).cloned();
                            track.caller = caller.map(|c| (wchan.clone(), c));
                        }
                        track.stack_age = 10;
                    }
                    track.stack_age = track.stack_age.saturating_sub(1);
                    if let Some((w, c)) = &track.caller {
                        if *w == wchan {
                            cause = format!("{wchan} ← {c}");
                        }
                    }
                }
                if state == 'D' {
                    cause.push_str(" [D]");
                }
                let same = track.stretch.as_ref().is_some_and(|(c, _)| *c == cause);
                if !same {
                    self.close(tid);
                }
                let track = self.tasks.get_mut(&tid).expect("inserted above");
                let st = track.stretch.get_or_insert_with(|| (cause.clone(), 0.0));
                st.1 += dt;
                self.causes.entry((*pid, cause)).or_default().seconds += dt;
            }
        }
        self.procs = procs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/fixtures/diagnose/{rel}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn latencytop_records() {
        let r = parse_latency(&fixture("proc/4242/latency"));
        assert_eq!(r.len(), 3);
        let (count, total, max, cause) = &r[0];
        assert_eq!(*count, 1830);
        assert!((total - 2.401877).abs() < 1e-9);
        assert!((max - 0.012004).abs() < 1e-9);
        assert_eq!(
            cause,
            "unix_stream_read_generic ← unix_stream_recvmsg ← sock_read_iter"
        );
    }

    #[test]
    fn stack_frames_skip_the_scheduler() {
        let f = parse_stack(&fixture("proc/4242/task/4243/stack"));
        assert_eq!(f[0], "unix_stream_read_generic");
        assert_eq!(f[1], "unix_stream_recvmsg");
        assert_eq!(parse_wchan("0"), None);
        assert_eq!(
            parse_wchan("do_epoll_wait\n").as_deref(),
            Some("do_epoll_wait")
        );
        assert_eq!(
            parse_schedstat("1825654 268793 2\n"),
            Some((1825654, 268793))
        );
    }

    #[test]
    fn sampler_charges_sleeping_tasks_to_their_wait() {
        let d = tempfile::tempdir().unwrap();
        let task = d.path().join("proc/50/task/51");
        std::fs::create_dir_all(&task).unwrap();
        std::fs::write(d.path().join("proc/50/stat"), "50 (w) S 1 0").unwrap();
        std::fs::write(task.join("stat"), "51 (w) S 1 0").unwrap();
        std::fs::write(task.join("wchan"), "pipe_read").unwrap();
        std::fs::write(task.join("schedstat"), "1000 500 3").unwrap();
        let mut s = Sampler::new(d.path(), Scope::Tree(50), 100);
        for _ in 0..5 {
            s.sample_at(0.01);
        }
        std::fs::write(task.join("stat"), "51 (w) R 1 0").unwrap();
        std::fs::write(task.join("schedstat"), "3000 900 5").unwrap();
        for _ in 0..10 {
            s.sample_at(0.01);
        }
        std::fs::write(task.join("stat"), "51 (w) D 1 0").unwrap();
        std::fs::write(task.join("wchan"), "folio_wait_bit").unwrap();
        for _ in 0..2 {
            s.sample_at(0.01);
        }
        // Two sleeps in the same place with a run in between are two waits.
        std::fs::write(task.join("stat"), "51 (w) S 1 0").unwrap();
        std::fs::write(task.join("wchan"), "hrtimer_nanosleep").unwrap();
        for slices in [6, 6, 7, 7] {
            std::fs::write(task.join("schedstat"), format!("3000 900 {slices}")).unwrap();
            s.sample_at(0.01);
        }
        let r = s.finish(0.21, 0.0, 21);
        let b = r.data().unwrap();
        let nap = b
            .causes
            .iter()
            .find(|c| c.cause.starts_with("hrtimer_nanosleep"))
            .unwrap();
        assert_eq!(nap.count, 2, "{nap:?}");
        assert!((nap.max_s - 0.02).abs() < 1e-9, "{nap:?}");
        let pipe = b
            .causes
            .iter()
            .find(|c| c.cause.starts_with("pipe_read"))
            .unwrap();
        assert!((pipe.total_s - 0.05).abs() < 1e-9, "{b:?}");
        assert!((pipe.max_s - 0.05).abs() < 1e-9);
        let io = b.causes.iter().find(|c| c.cause.ends_with("[D]")).unwrap();
        assert!((io.total_s - 0.02).abs() < 1e-9);
        assert_eq!(b.causes[0].cause, pipe.cause, "sorted by total time");
        // schedstat read on ticks 0 and 10: the task existed at start, so its
        // baseline is the first reading.
        assert!((b.sched[0].run_s - 2000e-9).abs() < 1e-15);
        assert!((b.sched[0].runqueue_s - 400e-9).abs() < 1e-15);
    }
}
