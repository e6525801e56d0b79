//! `cpu.compute`: single-core and all-core throughput of one cluster on the
//! board-work kernels of `kernels/` (compression, SHA-256, AES-128,
//! CRC-32C, a matrix multiply), sbc-bench-style: the same load on each
//! cluster, the CPU's crypto instructions used where present and said so.

use std::sync::{Arc, Barrier};
use std::time::Instant;

use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, TrialValues,
};
use crate::engine::{Needs, Spec};
use crate::experiments::common::child::{usable_cpus, PinGuard};
use crate::experiments::common::kernels::{self, Aes, Lz, Path as KPath};
use crate::system::cpu::{clusters, cores, list_text};
use crate::{Error, Result};

pub(crate) const NAME: &str = "cpu.compute";
pub(crate) const METRIC_THROUGHPUT: &str = "throughput";
pub(crate) const METRIC_FLOPS: &str = "flops";

pub(crate) const KERNELS: &[&str] = &["lz", "sha256", "aes128", "crc32c", "float"];

pub(crate) struct Compute;

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "single-core and all-core compute throughput per cluster: compression, SHA-256, AES, CRC, float",
    method: "Generates a text corpus of `size` bytes once (English-like words with 1/rank \
         frequency, seeded, ~3:1 compressible). Kernels: lz = LZ77 greedy match finding \
         (hash table of the last position per 4-byte prefix, 32 KiB window, as LZ4/zlib level \
         1) then Huffman code lengths over literals and length codes, canonical codes and \
         LSB-first bit packing (DEFLATE's second half); sha256 = SHA-256 of the corpus; \
         aes128 = AES-128-CTR encryption of the corpus in place (four blocks at a time on AES-NI); crc32c = CRC-32C of the \
         corpus; float = 64x64 double matrix multiply (i-k-j, 2*64^3 flop per pass, \
         cache-resident). sha256/aes128/crc32c use the CPU's instructions (SHA-NI, AES-NI, \
         SSE4.2 crc32; Armv8 SHA2, AES, CRC32) when runtime detection finds them and \
         path=auto, portable Rust otherwise; the notes say which ran. threads=1 runs one \
         thread pinned to the cluster's first CPU; threads=all one thread pinned to each CPU \
         of the cluster. Each thread runs the same number of passes (calibrated so one thread \
         takes ~0.2 s); a trial's time runs from the first thread's start to the last one's \
         end (stragglers count). throughput = corpus bytes processed per second by all \
         threads together (B/s); flops = floating-point operations per second (float only). \
         cluster=all takes every usable CPU as one group; cluster=N the N-th cluster \
         (cores sharing a cpufreq policy, else the same core type and capacity; see \
         cpu.clock's notes).",
    params: &[
            ParamSpec::new(
                "kernel",
                ParamKind::Choice(KERNELS),
                "lz,sha256,aes128,crc32c,float",
                "compute kernel (sweep)",
            ),
            ParamSpec::new(
                "threads",
                ParamKind::Text,
                "1,all",
                "1 (single-core) or all (one thread per CPU of the cluster), or a number",
            ),
            ParamSpec::new(
                "cluster",
                ParamKind::Text,
                "all",
                "all (every usable CPU) or a cluster index 0, 1, … in order of the lowest CPU",
            ),
            ParamSpec::new("size", ParamKind::Size, "256k", "corpus bytes per pass")
                .range(4096.0, (64u64 << 20) as f64),
            ParamSpec::new(
                "path",
                ParamKind::Choice(&["auto", "software"]),
                "auto",
                "auto: the CPU's crypto/CRC instructions when present; software: portable code",
            ),
        ],
    metrics: &[
            MetricSpec::higher(
                METRIC_THROUGHPUT,
                "B/s",
                "corpus bytes per second, all threads together",
            ),
            MetricSpec::higher(
                METRIC_FLOPS,
                "flop/s",
                "floating-point operations per second (kernel=float)",
            ),
        ],
    needs: Needs::NOTHING,
    defaults: RunDefaults::new(1, 5, 15, 90.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const FLOPS: Metric = SPEC.emits(METRIC_FLOPS);
const THROUGHPUT: Metric = SPEC.emits(METRIC_THROUGHPUT);

impl Experiment for Compute {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        let (cpus, _) = cluster_cpus(&q.cluster)?;
        threads(&q.threads, cpus.len()).map(|_| ())
    }
    fn prepare(&self, _ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let q = Params::parse(p)?;
        let (cpus, what) = cluster_cpus(&q.cluster)?;
        let n = threads(&q.threads, cpus.len())?;
        let kernel = q.kernel;
        let path = match (q.path.as_str(), kernels::hardware_name(&kernel)) {
            ("auto", Some(_)) => KPath::Hardware,
            _ => KPath::Software,
        };
        let corpus = Arc::new(kernels::corpus(q.size, 42));
        let mut run = ComputeRun {
            kernel: kernel.clone(),
            path,
            corpus,
            cpus: cpus.into_iter().cycle().take(n).collect(),
            passes: 1,
            what,
        };
        let t = Instant::now();
        let mut st = State::new(&run.kernel, &run.corpus, run.path);
        st.pass(&run.kernel, &run.corpus);
        let one = t.elapsed().as_secs_f64();
        run.passes = ((0.2 / one.max(1e-7)).ceil() as u64).max(1);
        Ok(Box::new(run))
    }
}

/// A point's parameters, read by name once, here.
struct Params {
    /// "all" or a cluster index (see `cluster_cpus`).
    cluster: String,
    threads: String,
    kernel: String,
    path: String,
    size: usize,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            cluster: p.text("cluster")?.to_string(),
            threads: p.text("threads")?.to_string(),
            kernel: p.text("kernel")?.to_string(),
            path: p.text("path")?.to_string(),
            size: p.usize("size")?,
        })
    }
}

/// The CPUs of `spec` ("all" or a cluster index) and how they were chosen.
fn cluster_cpus(spec: &str) -> Result<(Vec<usize>, String)> {
    let usable = usable_cpus();
    if spec.trim() == "all" {
        let t = format!("all usable CPUs {}", list_text(&usable));
        return Ok((usable, t));
    }
    let i: usize = spec.trim().parse().map_err(|_| {
        Error::usage(format!(
            "cluster={spec}: expected 'all' or a cluster index (0 = the cluster of the lowest CPU)"
        ))
    })?;
    let cl = clusters(&cores(std::path::Path::new("/")));
    let c = cl.get(i).ok_or_else(|| {
        Error::usage(format!(
            "cluster={i}: this machine has {} cluster(s): {}",
            cl.len(),
            cl.iter()
                .enumerate()
                .map(|(k, c)| format!("{k} = {}", c.describe()))
                .collect::<Vec<_>>()
                .join("; ")
        ))
    })?;
    let mine: Vec<usize> = c
        .cpus
        .iter()
        .copied()
        .filter(|x| usable.contains(x))
        .collect();
    if mine.is_empty() {
        return Err(Error::environment(format!(
            "cluster {i} ({}) has no CPU this process may run on (usable: {})",
            c.describe(),
            list_text(&usable)
        )));
    }
    Ok((mine, format!("cluster {i}: {}", c.describe())))
}

fn threads(spec: &str, cpus: usize) -> Result<usize> {
    match spec.trim() {
        "all" => Ok(cpus),
        s => match s.parse::<usize>() {
            Ok(n) if (1..=4096).contains(&n) => Ok(n),
            _ => Err(Error::usage(format!(
                "threads={spec}: expected 1, all, or a number of threads (1-4096)"
            ))),
        },
    }
}

struct ComputeRun {
    kernel: String,
    path: KPath,
    corpus: Arc<Vec<u8>>,
    /// One entry per thread: the CPU it is pinned to.
    cpus: Vec<usize>,
    passes: u64,
    what: String,
}

/// Per-thread buffers of a kernel, allocated before the timing.
struct State {
    lz: Option<Lz>,
    aes: Option<(Aes, Vec<u8>)>,
    mats: Option<(Vec<f64>, Vec<f64>, Vec<f64>)>,
    path: KPath,
    sink: u64,
}

impl State {
    fn new(kernel: &str, corpus: &[u8], path: KPath) -> State {
        let n = kernels::MATRIX * kernels::MATRIX;
        State {
            lz: (kernel == "lz").then(Lz::default),
            aes: (kernel == "aes128")
                .then(|| (Aes::new(*b"tunelab-aes-key!", path), corpus.to_vec())),
            mats: (kernel == "float").then(|| {
                (
                    (0..n).map(|i| (i % 13) as f64 * 0.25).collect(),
                    (0..n).map(|i| (i % 7) as f64 * 0.5).collect(),
                    vec![0.0; n],
                )
            }),
            path,
            sink: 0,
        }
    }

    /// One pass over the corpus (float: one matrix product).
    fn pass(&mut self, kernel: &str, corpus: &[u8]) {
        let v = match kernel {
            "lz" => self.lz.as_mut().map_or(0, |l| l.compress(corpus) as u64),
            "sha256" => kernels::sha256(corpus, self.path)[0] as u64,
            "crc32c" => kernels::crc32c(corpus, self.path) as u64,
            "aes128" => self.aes.as_mut().map_or(0, |(a, buf)| {
                a.ctr(self.sink, buf);
                buf[0] as u64
            }),
            _ => self.mats.as_mut().map_or(0, |(a, b, c)| {
                kernels::matmul(a, b, c);
                c[7] as u64
            }),
        };
        self.sink = self.sink.wrapping_add(std::hint::black_box(v));
    }
}

impl PointRun for ComputeRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        ctx.check_cancel()?;
        let n = self.cpus.len();
        let start = Barrier::new(n);
        let (kernel, corpus, passes, path) = (&self.kernel, &self.corpus, self.passes, self.path);
        let spans: Vec<Result<(Instant, Instant)>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .cpus
                .iter()
                .map(|&cpu| {
                    let start = &start;
                    s.spawn(move || {
                        let _pin = PinGuard::new(Some(cpu))?;
                        let mut st = State::new(kernel, corpus, path);
                        start.wait();
                        let t0 = Instant::now();
                        for _ in 0..passes {
                            st.pass(kernel, corpus);
                        }
                        std::hint::black_box(st.sink);
                        Ok((t0, Instant::now()))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::measurement("a compute thread panicked")))
                })
                .collect()
        });
        let spans: Vec<(Instant, Instant)> = spans.into_iter().collect::<Result<_>>()?;
        let first = spans.iter().map(|s| s.0).min().unwrap_or_else(Instant::now);
        let last = spans.iter().map(|s| s.1).max().unwrap_or_else(Instant::now);
        let secs = (last - first).as_secs_f64().max(1e-9);
        let total = (n as u64 * passes) as f64;
        let mut v = TrialValues::new();
        if self.kernel == "float" {
            let m = kernels::MATRIX as f64;
            v.set(FLOPS, total * 2.0 * m * m * m / secs);
        } else {
            v.set(THROUGHPUT, total * self.corpus.len() as f64 / secs);
        }
        Ok(v)
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let instr = match (self.kernel.as_str(), self.path) {
            ("lz" | "float", _) => "portable Rust (no special instructions)".to_string(),
            (k, KPath::Hardware) => format!(
                "the CPU's {} instructions (runtime detection)",
                kernels::hardware_name(k).unwrap_or("?")
            ),
            (k, KPath::Software) => match kernels::hardware_name(k) {
                Some(h) => format!("portable Rust (path=software; the CPU has {h})"),
                None => "portable Rust (the CPU has no instructions for it)".to_string(),
            },
        };
        let mut first = format!("kernel {}: {instr}", self.kernel);
        if self.kernel == "lz" {
            let packed = Lz::default().compress(&self.corpus);
            first.push_str(&format!(
                "; the corpus packs to {:.1}% of its size",
                packed as f64 * 100.0 / self.corpus.len().max(1) as f64
            ));
        }
        Ok(PointExtras {
            notes: vec![
                first,
                format!(
                    "{} thread(s) pinned to CPUs {} of {}; {} passes of {} bytes per thread per trial",
                    self.cpus.len(),
                    list_text(&{
                        let mut c = self.cpus.clone();
                        c.sort_unstable();
                        c.dedup();
                        c
                    }),
                    self.what,
                    self.passes,
                    self.corpus.len()
                ),
                "in memory only: no files, the page cache and the device are not involved".into(),
            ],
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_thread_and_cluster_values_are_usage_errors() {
        assert_eq!(threads("all", 4).unwrap(), 4);
        assert_eq!(threads("2", 4).unwrap(), 2);
        assert_eq!(threads("0", 4).unwrap_err().exit_code(), 2);
        assert_eq!(cluster_cpus("x").unwrap_err().exit_code(), 2);
        assert_eq!(cluster_cpus("999").unwrap_err().exit_code(), 2);
        assert!(!cluster_cpus("all").unwrap().0.is_empty());
    }
}
