//! `cpu.clock`: the clock each core really runs at under load, measured the
//! way sbc-bench's `mhz` does — a chain of dependent integer adds whose
//! latency is one cycle, so adds per second = cycles per second — set
//! beside what cpufreq and /proc/cpuinfo claim, core by core and cluster by
//! cluster.

use std::path::Path;
use std::time::Instant;

use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, Series, TrialValues,
};
use crate::engine::{Needs, Spec};
use crate::experiments::common::child::{usable_cpus, PinGuard};
use crate::stats;
use crate::system::cpu::{clusters, cores, list_text, Core};
use crate::{Error, Result};

pub(crate) const NAME: &str = "cpu.clock";
pub(crate) const METRIC_CLOCK_MAX: &str = "clock_max";
pub(crate) const METRIC_CLOCK_MIN: &str = "clock_min";
pub(crate) const METRIC_VS_MAX: &str = "clock_vs_max";
pub(crate) const METRIC_VS_CPUINFO: &str = "clock_vs_cpuinfo";

/// Dependent adds per loop iteration: the loop's own decrement and branch
/// run beside the chain, so an iteration costs exactly CHAIN cycles.
pub(crate) const CHAIN: u64 = 200;

/// Whether [`add_chain`] is the hand-written assembly whose latency is known
/// (x86_64, aarch64) or the portable fallback the compiler may reshape.
pub(crate) const CHAIN_VERIFIED: bool = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));

/// Run `iters` (≥ 1) iterations of CHAIN dependent register adds: CHAIN ×
/// `iters` cycles on a core whose integer add has a one-cycle latency
/// (every x86_64 and Armv8 core). Register-register adds, because some
/// cores fold add-immediate chains at rename.
#[inline(never)]
pub(crate) fn add_chain(iters: u64) -> u64 {
    let iters = iters.max(1);
    let mut acc: u64 = 0;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: register-only arithmetic and a local branch; no memory, no stack.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 200",
            "add {acc}, {one}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            acc = inout(reg) acc,
            one = in(reg) 1u64,
            n = inout(reg) iters => _,
            options(nomem, nostack),
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: register-only arithmetic and a local branch; no memory, no stack.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 200",
            "add {acc}, {acc}, {one}",
            ".endr",
            "subs {n}, {n}, #1",
            "b.ne 2b",
            acc = inout(reg) acc,
            one = in(reg) 1u64,
            n = inout(reg) iters => _,
            options(nomem, nostack),
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        // Unverified: black_box keeps the adds but may add a store/load each.
        for _ in 0..iters * CHAIN {
            acc = std::hint::black_box(acc).wrapping_add(1);
        }
    }
    std::hint::black_box(acc)
}

/// The cross-check of [`add_chain`] on x86_64: `iters` iterations of 100
/// dependent 64-bit `imul`s, whose latency is 3 cycles on every x86_64 core
/// since Nehalem and Zen. If the add chain ran faster than one add per
/// cycle (fused or eliminated adds), the two would disagree.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
pub(crate) fn mul_chain(iters: u64) -> u64 {
    let mut acc: u64 = 1;
    // SAFETY: register-only arithmetic and a local branch; no memory, no stack.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 100",
            "imul {acc}, {one}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            acc = inout(reg) acc,
            one = in(reg) 1u64,
            n = inout(reg) iters.max(1) => _,
            options(nomem, nostack),
        );
    }
    std::hint::black_box(acc)
}

/// Seconds of CPU time the calling thread has used (preemption excluded).
pub(crate) fn thread_cpu_s() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Iterations of [`add_chain`] that last about `secs` on this core.
pub(crate) fn calibrate_chain(secs: f64) -> u64 {
    let mut n = 64u64;
    loop {
        let t = Instant::now();
        add_chain(n);
        let dt = t.elapsed().as_secs_f64();
        if dt >= secs / 4.0 || n > 1 << 40 {
            return ((n as f64 * secs / dt.max(1e-9)) as u64).max(1);
        }
        n *= 4;
    }
}

/// One clock reading: the best of `samples` short timings of `iters`
/// iterations of `chain` costing `cycles` each (a timing a preemption or a
/// steal landed in only reads lower, never higher; short timings so that
/// some fall between preemptions on a busy machine). Returns (best Hz,
/// median Hz).
pub(crate) fn measure_here(
    chain: fn(u64) -> u64,
    cycles: u64,
    iters: u64,
    samples: usize,
) -> (f64, f64) {
    let mut hz: Vec<f64> = (0..samples.max(1))
        .map(|_| {
            let t = Instant::now();
            chain(iters);
            (iters * cycles) as f64 / t.elapsed().as_secs_f64().max(1e-12)
        })
        .collect();
    hz.sort_by(f64::total_cmp);
    (hz[hz.len() - 1], hz[hz.len() / 2])
}

/// Seconds per timed run: short, so that on a busy machine some runs fall
/// between two preemptions (time slices are a few ms).
const SAMPLE_S: f64 = 0.0005;

pub(crate) struct Clock;

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "effective clock of each core under load, beside what cpufreq and /proc/cpuinfo claim",
    method: "Pins the measuring thread to each selected core in turn. On each core it first runs \
         the load for `ramp` (unmeasured, so an on-demand governor raises the clock), then \
         times `samples` runs of a loop of 200 dependent register-register integer adds per \
         iteration (inline assembly on x86_64 and aarch64, so the compiler cannot shorten the \
         chain; an add has a one-cycle latency on every x86_64 and Armv8 core and the loop's \
         counter and branch run beside the chain). Each run lasts ~20 ms; clock = adds / \
         wall seconds of the best run (a preemption or steal inside a run only lowers it). \
         Right after the timed runs the core's scaling_cur_freq is read, with \
         cpuinfo_max_freq, scaling_max_freq, the governor and /proc/cpuinfo's \"cpu MHz\". \
         clock_max/clock_min = fastest/slowest core this trial; clock_vs_max = the lowest \
         ratio of a core's measured clock to its cpuinfo_max_freq (absent without cpufreq); \
         clock_vs_cpuinfo = the lowest ratio to /proc/cpuinfo's MHz (absent where it shows \
         none, e.g. arm64). Clusters are cores sharing a cpufreq policy (else the same MIDR \
         core type and cpu_capacity). On other architectures the chain is portable Rust whose \
         latency is not verified: the notes say so.",
    params: &[
        ParamSpec::new(
            "cpus",
            ParamKind::Text,
            "all",
            "cores to measure: all (every usable CPU) or a list such as 0-3 or 4 5",
        ),
        ParamSpec::new(
            "ramp",
            ParamKind::Duration,
            "0.05",
            "unmeasured load on each core before timing, seconds (lets the governor react)",
        )
        .range(0.0, 10.0),
        ParamSpec::new(
            "samples",
            ParamKind::Count,
            "100",
            "timed ~0.5 ms runs per core per trial; the best counts",
        )
        .range(1.0, 1000.0),
    ],
    metrics: &[
        MetricSpec::higher(METRIC_CLOCK_MAX, "Hz", "measured clock of the fastest core"),
        MetricSpec::higher(METRIC_CLOCK_MIN, "Hz", "measured clock of the slowest core"),
        MetricSpec::higher(
            METRIC_VS_MAX,
            "ratio",
            "lowest measured / cpuinfo_max_freq over the cores (1 = reaches its maximum)",
        ),
        MetricSpec::higher(
            METRIC_VS_CPUINFO,
            "ratio",
            "lowest measured / /proc/cpuinfo MHz over the cores",
        ),
    ],
    needs: Needs::NOTHING,
    defaults: RunDefaults::new(1, 5, 15, 30.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const CLOCK_MAX: Metric = SPEC.emits(METRIC_CLOCK_MAX);
const CLOCK_MIN: Metric = SPEC.emits(METRIC_CLOCK_MIN);
const CLOCK_VS_CPUINFO: Metric = SPEC.emits(METRIC_VS_CPUINFO);
const CLOCK_VS_MAX: Metric = SPEC.emits(METRIC_VS_MAX);

impl Experiment for Clock {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        selected(&Params::parse(p)?.cpus).map(|_| ())
    }
    fn prepare(&self, _ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let cpus = selected(&q.cpus)?;
        let iters = calibrate_chain(SAMPLE_S);
        Ok(Box::new(ClockRun {
            per_core: cpus.iter().map(|&c| (c, Vec::new(), None)).collect(),
            cpus,
            iters,
            ramp: q.ramp,
            samples: q.samples,
            claims: Vec::new(),
        }))
    }
}

/// A point's parameters, read by name once, here.
struct Params {
    /// "all" or a CPU list (see `selected`).
    cpus: String,
    ramp: f64,
    samples: usize,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            cpus: p.text("cpus")?.to_string(),
            ramp: p.f64("ramp")?,
            samples: p.usize("samples")?,
        })
    }
}

/// The CPUs `spec` names, all of them usable by this process.
fn selected(spec: &str) -> Result<Vec<usize>> {
    let usable = usable_cpus();
    if spec.trim() == "all" {
        return Ok(usable);
    }
    let v = crate::system::cpu::parse_cpu_list(spec).unwrap_or_default();
    if v.is_empty() {
        return Err(Error::usage(format!(
            "cpus={spec}: expected 'all' or a CPU list such as 0-3 or \"4 5\""
        )));
    }
    if let Some(c) = v.iter().find(|c| !usable.contains(c)) {
        return Err(Error::usage(format!(
            "cpus={spec}: CPU {c} is not one this process may run on (usable: {})",
            list_text(&usable)
        )));
    }
    Ok(v)
}

struct ClockRun {
    cpus: Vec<usize>,
    iters: u64,
    ramp: f64,
    samples: usize,
    /// Per core: measured Hz per trial, and scaling_cur_freq under load (kHz).
    per_core: Vec<(usize, Vec<f64>, Option<u64>)>,
    /// cpufreq's and /proc/cpuinfo's claims, read at the end of each trial.
    claims: Vec<Core>,
}

impl PointRun for ClockRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let mut hz = Vec::with_capacity(self.cpus.len());
        for (i, &cpu) in self.cpus.iter().enumerate() {
            ctx.check_cancel()?;
            let _pin = PinGuard::new(Some(cpu))?;
            let t = Instant::now();
            while t.elapsed().as_secs_f64() < self.ramp {
                add_chain(self.iters / 4);
            }
            let (best, _) = measure_here(add_chain, CHAIN, self.iters, self.samples);
            let cur = read_cur_khz(cpu);
            self.per_core[i].1.push(best);
            if cur.is_some() {
                self.per_core[i].2 = cur;
            }
            hz.push(best);
        }
        self.claims = cores(Path::new("/"));
        let mut v = TrialValues::new();
        v.set(CLOCK_MAX, hz.iter().cloned().fold(0.0, f64::max));
        v.set(CLOCK_MIN, hz.iter().cloned().fold(f64::MAX, f64::min));
        let ratio = |f: &dyn Fn(&Core) -> Option<f64>| {
            let r: Vec<f64> = self
                .cpus
                .iter()
                .zip(&hz)
                .filter_map(|(c, h)| {
                    let claim = self.claims.iter().find(|k| k.cpu == *c).and_then(f)?;
                    (claim > 0.0).then(|| h / claim)
                })
                .collect();
            (r.len() == self.cpus.len()).then(|| r.iter().cloned().fold(f64::MAX, f64::min))
        };
        if let Some(r) = ratio(&|k| k.max_khz.map(|m| m as f64 * 1e3)) {
            v.set(CLOCK_VS_MAX, r);
        }
        if let Some(r) = ratio(&|k| k.cpuinfo_mhz.map(|m| m * 1e6)) {
            v.set(CLOCK_VS_CPUINFO, r);
        }
        Ok(v)
    }

    fn warmup_done(&mut self) {
        for c in &mut self.per_core {
            c.1.clear();
        }
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let median = |v: &[f64]| (!v.is_empty()).then(|| stats::summarize(v).median);
        let mut notes = vec![if CHAIN_VERIFIED {
            format!(
                "method: {CHAIN} dependent register adds per loop iteration in inline assembly \
                 ({}); {} iterations (~0.5 ms) per timed run, best of {} per core per trial",
                std::env::consts::ARCH,
                self.iters,
                self.samples
            )
        } else {
            format!(
                "method UNVERIFIED on {}: the add chain is portable Rust whose latency per add \
                 is not known to be one cycle; the clock figures may be off by a whole factor",
                std::env::consts::ARCH
            )
        }];
        #[cfg(target_arch = "x86_64")]
        if let Some(&cpu) = self.cpus.first() {
            let _pin = PinGuard::new(Some(cpu))?;
            let add = measure_here(add_chain, CHAIN, self.iters, self.samples).0;
            let mul = measure_here(mul_chain, 300, (self.iters * 2 / 3).max(1), self.samples).0;
            notes.push(format!(
                "cross-check on cpu{cpu}: a dependent imul chain (3-cycle latency) reads {:.0} MHz, \
                 the add chain {:.0} MHz (imul/add {:.3}; 1 = each add took one cycle)",
                mul / 1e6,
                add / 1e6,
                mul / add
            ));
        }
        let mut points = Vec::new();
        for (cpu, hz, cur) in &self.per_core {
            let Some(m) = median(hz) else { continue };
            points.push((*cpu as f64, m));
            notes.push(core_line(
                *cpu,
                m,
                *cur,
                self.claims.iter().find(|k| k.cpu == *cpu),
            ));
        }
        for cl in clusters(&self.claims) {
            let ours: Vec<f64> = self
                .per_core
                .iter()
                .filter(|(c, _, _)| cl.cpus.contains(c))
                .filter_map(|(_, hz, _)| median(hz))
                .collect();
            if let Some(m) = median(&ours) {
                notes.push(format!(
                    "cluster {}: measured {:.0} MHz (median of its cores)",
                    cl.describe(),
                    m / 1e6
                ));
            }
        }
        notes.extend(governor_findings(&self.claims, &self.per_core));
        Ok(PointExtras {
            series: vec![Series {
                name: "measured clock per core".into(),
                x_label: "cpu".into(),
                x_unit: "count".into(),
                y_label: "clock".into(),
                y_unit: "Hz".into(),
                points,
            }],
            notes,
            ..Default::default()
        })
    }
}

fn read_cur_khz(cpu: usize) -> Option<u64> {
    std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq"
    ))
    .ok()?
    .trim()
    .parse()
    .ok()
}

/// "cpu2: measured 1198 MHz; scaling_cur_freq 1200 MHz under load, …".
fn core_line(cpu: usize, hz: f64, cur_under_load: Option<u64>, claim: Option<&Core>) -> String {
    let mhz = |k: Option<u64>| {
        k.map(|k| format!("{} MHz", k / 1000))
            .unwrap_or_else(|| "–".into())
    };
    let mut s = format!("cpu{cpu}: measured {:.0} MHz", hz / 1e6);
    match claim {
        Some(k) => {
            if let Some(c) = &k.core {
                s.push_str(&format!(" ({c})"));
            }
            if k.max_khz.is_some() || cur_under_load.is_some() {
                s.push_str(&format!(
                    "; cpufreq: cur under load {}, max {}, governor limit {}, governor {}",
                    mhz(cur_under_load),
                    mhz(k.max_khz),
                    mhz(k.scaling_max_khz),
                    k.governor.as_deref().unwrap_or("?")
                ));
            } else {
                s.push_str("; no cpufreq (fixed clock or a VM)");
            }
            match k.cpuinfo_mhz {
                Some(m) => {
                    s.push_str(&format!(
                        "; /proc/cpuinfo {m:.0} MHz (measured/cpuinfo {:.3})",
                        hz / 1e6 / m
                    ));
                    if k.max_khz.is_none() && hz / 1e6 > 1.05 * m {
                        s.push_str(
                            " — above it because without cpufreq /proc/cpuinfo shows the TSC's \
                             nominal rate (\"tsc: Detected … MHz\" at boot) while the core runs \
                             at a boost clock",
                        );
                    }
                }
                None => s.push_str("; /proc/cpuinfo shows no MHz"),
            }
        }
        None => s.push_str("; no cpufreq or /proc/cpuinfo facts"),
    }
    s
}

/// Notes for a core below its advertised maximum under load: a governor
/// or scaling_max_freq cap, or a clock the hardware does not deliver.
pub(crate) fn governor_findings(
    claims: &[Core],
    per_core: &[(usize, Vec<f64>, Option<u64>)],
) -> Vec<String> {
    let mut out = Vec::new();
    for (cpu, hz, _) in per_core {
        let Some(k) = claims.iter().find(|k| k.cpu == *cpu) else {
            continue;
        };
        let (Some(max), Some(best)) = (k.max_khz, hz.iter().cloned().reduce(f64::max)) else {
            continue;
        };
        let max_hz = max as f64 * 1e3;
        if best >= 0.95 * max_hz {
            continue;
        }
        let why = match (k.scaling_max_khz, k.governor.as_deref()) {
            (Some(cap), _) if cap < max => format!(
                "scaling_max_freq caps it at {} MHz (raise it, or the thermal/firmware limit that set it)",
                cap / 1000
            ),
            (_, Some(g @ ("powersave" | "conservative" | "userspace"))) => {
                format!("the {g} governor keeps it low (try performance or schedutil)")
            }
            _ => "the hardware or firmware does not deliver the advertised clock (thermal cap, \
                  under-voltage, or a firmware limit)"
                .to_string(),
        };
        out.push(format!(
            "finding: cpu{cpu} never reached its advertised {} MHz under load (best {:.0} MHz, \
             {:.0}%): {why}",
            max / 1000,
            best / 1e6,
            best * 100.0 / max_hz
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chains_do_the_work_they_claim() {
        // Every add of every iteration ran (the result counts them).
        assert_eq!(add_chain(3), 3 * CHAIN);
        assert_eq!(add_chain(0), CHAIN, "zero iterations run once, never 2^64");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(mul_chain(5), 1);
        assert!(calibrate_chain(0.0005) >= 1);
        let (best, median) = measure_here(add_chain, CHAIN, 100, 5);
        assert!(best >= median && median > 0.0);
    }

    #[test]
    fn a_capped_core_is_a_finding() {
        let core = |cpu, gov: &str, cap| Core {
            cpu,
            max_khz: Some(1_200_000),
            scaling_max_khz: Some(cap),
            governor: Some(gov.into()),
            ..Core::default()
        };
        let claims = vec![
            core(0, "schedutil", 1_200_000),
            core(1, "powersave", 1_200_000),
            core(2, "schedutil", 800_000),
        ];
        let per = vec![
            (0, vec![1.19e9], None),
            (1, vec![0.6e9], None),
            (2, vec![0.8e9], None),
        ];
        let f = governor_findings(&claims, &per);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(
            f[0].contains("cpu1 never reached its advertised 1200 MHz"),
            "{}",
            f[0]
        );
        assert!(f[0].contains("powersave governor"), "{}", f[0]);
        assert!(
            f[1].contains("scaling_max_freq caps it at 800 MHz"),
            "{}",
            f[1]
        );
        assert!(selected("x").is_err());
    }
}
