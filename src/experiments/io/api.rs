//! `io.api`: the double-buffering study. The same sequential write and read
//! of a cached file through (a) raw read()/write() on a descriptor, (b) C
//! stdio fread()/fwrite() with its default buffer, (c) stdio after
//! setvbuf() to the record size, (d) Rust BufReader/BufWriter — at small
//! record sizes, counting the system calls each one makes so the cause
//! (calls per MiB) is visible next to the effect (B/s).
//!
//! libc: FILE, fdopen, setvbuf, _IOFBF, c_char, fwrite, fread, fclose, close (the experiment measures C stdio, which rustix does not wrap)

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::fd::IntoRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::engine::Spec;
use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, Needs, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, Series, TrialValues,
};
use crate::experiments::common::cache_control::open_with;
use crate::experiments::common::util::{fill_file, sum_bytes};
use crate::safety::AlignedBuf;
use crate::stats;
use crate::{Error, Result};

/// Name and the metrics `advise` reads, as constants so a rename cannot
/// silently drop a finding (advise::evidence checks them against the registry).
pub(crate) const NAME: &str = "io.api";
pub(crate) const METRIC_WRITE_THROUGHPUT: &str = "write_throughput";

pub(crate) struct Api;

const APIS: &[&str] = &["fd", "stdio", "stdio-setvbuf", "bufio"];

pub(crate) static SPEC: Spec = Spec {
    name: NAME,
    summary: "raw fd vs stdio vs setvbuf vs Rust BufReader/BufWriter at small records, with syscall counts",
    method: "Creates a file of `size` random bytes and keeps it in the page cache: this measures the \
         cost of the calls and copies, not the device. A trial repeats passes (at least the trial time, 200 ms by \
         default, per phase) of: write the whole file sequentially from offset 0 (overwriting, no truncate, \
         no fsync — the data stays in the page cache) in `record`-byte application writes, then \
         read it back in `record`-byte application reads, summing every byte. api=fd: one \
         write()/read() system call per record; api=stdio: fdopen() + fwrite()/fread() with \
         glibc's default buffer (st_blksize, usually 4 KiB), fflush/fclose inside the timing; \
         api=stdio-setvbuf: the same after setvbuf(_IOFBF) with a buffer of `record` bytes; \
         api=bufio: Rust BufWriter/BufReader with their default 8 KiB buffer. Throughput is \
         file bytes per second (B/s). System calls are counted from the measuring thread's \
         /proc/thread-self/io syscw/syscr (read()/write()-family calls only; the overhead of \
         reading that file is subtracted) and reported per MiB (2^20 B) of file data. Expected \
         shape: stdio stays on a plateau set by its 4 KiB buffer while the fd curve rises with \
         the record size and crosses it around the buffer size.",
    params: &[
            ParamSpec::new("size", ParamKind::Size, "16M", "file size")
                .range(65536.0, (16u64 << 30) as f64),
            ParamSpec::new(
                "record",
                ParamKind::Size,
                "32,128,512,1k,4k,16k",
                "bytes per application read/write call (sweep)",
            )
            .range(1.0, (16u64 << 20) as f64),
            ParamSpec::new(
                "api",
                ParamKind::Choice(APIS),
                "fd,stdio,stdio-setvbuf,bufio",
                "fd = read()/write(); stdio = fread()/fwrite() default buffer; stdio-setvbuf = \
                 buffer of `record` bytes; bufio = Rust BufReader/BufWriter (sweep)",
            ),
        ],
    metrics: &[
            MetricSpec::higher(
                METRIC_WRITE_THROUGHPUT,
                "B/s",
                "file bytes written per second (page cache, no fsync)",
            ),
            MetricSpec::higher(
                "read_throughput",
                "B/s",
                "file bytes read and summed per second (page cache)",
            ),
            MetricSpec::lower(
                "write_syscalls_per_mib",
                "count",
                "write()-family system calls per MiB written",
            ),
            MetricSpec::lower(
                "read_syscalls_per_mib",
                "count",
                "read()-family system calls per MiB read",
            ),
        ],
    needs: Needs::SCRATCH,
    defaults: RunDefaults::new(1, 3, 8, 60.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const READ_SYSCALLS_PER_MIB: Metric = SPEC.emits("read_syscalls_per_mib");
const READ_THROUGHPUT: Metric = SPEC.emits("read_throughput");
const WRITE_SYSCALLS_PER_MIB: Metric = SPEC.emits("write_syscalls_per_mib");
const WRITE_THROUGHPUT: Metric = SPEC.emits("write_throughput");

/// A point's parameters, read by name once, here.
struct Params {
    size: u64,
    record: u64,
    api: String,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            size: p.u64("size")?,
            record: p.u64("record")?,
            api: p.text("api")?.to_string(),
        })
    }
}

impl Experiment for Api {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn validate(&self, p: &Point) -> Result<()> {
        let q = Params::parse(p)?;
        if q.record > q.size {
            return Err(Error::usage(format!(
                "io.api: record ({}) is larger than size ({}); use a smaller record",
                q.record, q.size
            )));
        }
        Ok(())
    }
    fn scratch_bytes(&self, p: &Point) -> u64 {
        Params::parse(p).map_or(0, |q| q.size)
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let Params { size, record, api } = Params::parse(p)?;
        let record = record as usize;
        let scratch = ctx.scratch()?;
        scratch.ensure_space(size)?;
        let name = format!("api-{api}-{record}");
        let path = scratch.file_path(&name);
        let mut f = scratch.create_file(&name, 0)?;
        fill_file(&mut f, &path, size, 3)?;
        drop(f);
        Ok(Box::new(ApiRun {
            path,
            size,
            record,
            api,
            buf: AlignedBuf::random(record, 5)?,
            io_overhead: measure_counter_overhead(),
            samples: Default::default(),
        }))
    }
}

/// (syscr, syscw) of the calling thread.
fn thread_io() -> (u64, u64) {
    use crate::system::proc as proc_;
    let s = proc_::read_pid("thread-self", "io").unwrap_or_default();
    let get = |key: &str| proc_::keyed::number(&s, key).unwrap_or(0);
    (get("syscr"), get("syscw"))
}

/// Read calls that one `thread_io()` itself adds between two readings.
fn measure_counter_overhead() -> u64 {
    let a = thread_io();
    let b = thread_io();
    b.0.saturating_sub(a.0)
}

struct ApiRun {
    path: PathBuf,
    size: u64,
    record: usize,
    api: String,
    buf: AlignedBuf,
    io_overhead: u64,
    /// write, read, write calls/MiB, read calls/MiB.
    samples: [Vec<f64>; 4],
}

impl Drop for ApiRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A stdio stream over a descriptor, closed on drop.
struct Stdio {
    fp: *mut libc::FILE,
    _vbuf: Vec<u8>,
}

impl Stdio {
    fn open(file: File, mode: &std::ffi::CStr, vbuf: Option<usize>, path: &Path) -> Result<Stdio> {
        let fd = file.into_raw_fd();
        // SAFETY: fd is a valid descriptor we own; fdopen takes it over.
        let fp = unsafe { libc::fdopen(fd, mode.as_ptr()) };
        if fp.is_null() {
            let e = std::io::Error::last_os_error();
            // SAFETY: fdopen failed, the descriptor is still ours.
            unsafe { libc::close(fd) };
            return Err(Error::io("cannot fdopen", path, e));
        }
        let mut s = Stdio {
            fp,
            _vbuf: Vec::new(),
        };
        if let Some(n) = vbuf {
            s._vbuf = vec![0u8; n];
            // SAFETY: the buffer lives as long as the stream (dropped after fclose).
            let rc = unsafe {
                libc::setvbuf(
                    fp,
                    s._vbuf.as_mut_ptr() as *mut libc::c_char,
                    libc::_IOFBF,
                    n,
                )
            };
            if rc != 0 {
                return Err(Error::measurement("setvbuf failed"));
            }
        }
        Ok(s)
    }

    fn close(mut self, path: &Path) -> Result<()> {
        let fp = std::mem::replace(&mut self.fp, std::ptr::null_mut());
        // SAFETY: fp is a valid stream; it is not used again.
        if unsafe { libc::fclose(fp) } != 0 {
            return Err(Error::io(
                "cannot fclose",
                path,
                std::io::Error::last_os_error(),
            ));
        }
        Ok(())
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        if !self.fp.is_null() {
            // SAFETY: still open (close() nulls it).
            unsafe { libc::fclose(self.fp) };
        }
    }
}

impl ApiRun {
    fn write_pass(&mut self) -> Result<f64> {
        let path = self.path.clone();
        let f = open_with(&path, true, 0)?;
        let rec = self.record;
        let size = self.size;
        let buf = &self.buf.as_slice()[..rec];
        let werr = |e: std::io::Error| Error::io("cannot write", &path, e);
        let t = Instant::now();
        match self.api.as_str() {
            "fd" => {
                let mut f = f;
                let mut left = size;
                while left > 0 {
                    let n = left.min(rec as u64) as usize;
                    f.write_all(&buf[..n]).map_err(werr)?;
                    left -= n as u64;
                }
            }
            "bufio" => {
                let mut w = BufWriter::new(f);
                let mut left = size;
                while left > 0 {
                    let n = left.min(rec as u64) as usize;
                    w.write_all(&buf[..n]).map_err(werr)?;
                    left -= n as u64;
                }
                w.flush().map_err(werr)?;
            }
            api => {
                let vbuf = (api == "stdio-setvbuf").then_some(rec);
                let s = Stdio::open(f, c"w", vbuf, &path)?;
                let mut left = size;
                while left > 0 {
                    let n = left.min(rec as u64) as usize;
                    // SAFETY: buf is valid for n bytes, s.fp is open.
                    let done = unsafe { libc::fwrite(buf.as_ptr().cast(), 1, n, s.fp) };
                    if done != n {
                        return Err(werr(std::io::Error::last_os_error()));
                    }
                    left -= n as u64;
                }
                s.close(&path)?;
            }
        }
        Ok(t.elapsed().as_secs_f64())
    }

    fn read_pass(&mut self) -> Result<f64> {
        let path = self.path.clone();
        let f = File::open(&path).map_err(|e| Error::io("cannot open", &path, e))?;
        let rec = self.record;
        let buf = &mut self.buf.as_mut_slice()[..rec];
        let rerr = |e: std::io::Error| Error::io("cannot read", &path, e);
        let t = Instant::now();
        let mut total = 0u64;
        match self.api.as_str() {
            "fd" | "bufio" => {
                let mut r: Box<dyn Read> = if self.api == "fd" {
                    Box::new(f)
                } else {
                    Box::new(BufReader::new(f))
                };
                loop {
                    let n = r.read(buf).map_err(rerr)?;
                    if n == 0 {
                        break;
                    }
                    sum_bytes(&buf[..n]);
                    total += n as u64;
                }
            }
            api => {
                let vbuf = (api == "stdio-setvbuf").then_some(rec);
                let s = Stdio::open(f, c"r", vbuf, &path)?;
                loop {
                    // SAFETY: buf is valid for rec bytes, s.fp is open.
                    let n = unsafe { libc::fread(buf.as_mut_ptr().cast(), 1, rec, s.fp) };
                    if n == 0 {
                        break;
                    }
                    sum_bytes(&buf[..n]);
                    total += n as u64;
                }
                s.close(&path)?;
            }
        }
        let dt = t.elapsed().as_secs_f64();
        if total != self.size {
            return Err(Error::measurement(format!(
                "read {total} bytes from {}, expected {}",
                path.display(),
                self.size
            )));
        }
        Ok(dt)
    }
}

impl PointRun for ApiRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let (mut w, mut r) = (0.0, 0.0);
        let (mut wc, mut rc) = (0u64, 0u64);
        let mut passes = 0u64;
        let min = ctx.trial_time().as_secs_f64();
        while passes == 0 || ((w < min || r < min) && passes < 10_000) {
            ctx.check_cancel()?;
            let a = thread_io();
            w += self.write_pass()?;
            let b = thread_io();
            r += self.read_pass()?;
            let c = thread_io();
            wc += b.1.saturating_sub(a.1);
            rc += c.0.saturating_sub(b.0).saturating_sub(self.io_overhead);
            passes += 1;
        }
        let bytes = (self.size * passes) as f64;
        let mib = bytes / (1u64 << 20) as f64;
        let v = [bytes / w, bytes / r, wc as f64 / mib, rc as f64 / mib];
        for (s, x) in self.samples.iter_mut().zip(v) {
            s.push(x);
        }
        Ok(TrialValues::new()
            .with(WRITE_THROUGHPUT, v[0])
            .with(READ_THROUGHPUT, v[1])
            .with(WRITE_SYSCALLS_PER_MIB, v[2])
            .with(READ_SYSCALLS_PER_MIB, v[3]))
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let names = [
            ("write_throughput", "B/s"),
            ("read_throughput", "B/s"),
            ("write_syscalls_per_mib", "count"),
            ("read_syscalls_per_mib", "count"),
        ];
        let series = names
            .iter()
            .zip(&self.samples)
            .filter(|(_, s)| !s.is_empty())
            .map(|((n, u), s)| Series {
                name: format!("{n} api={}", self.api),
                x_label: "record".into(),
                x_unit: "B".into(),
                y_label: (*n).into(),
                y_unit: (*u).into(),
                points: vec![(self.record as f64, stats::summarize(s).median)],
            })
            .collect();
        Ok(PointExtras {
            series,
            notes: vec![
                "page cache: the file stays cached; no fsync; measures call and copy overhead, not the device"
                    .into(),
                "system calls counted from /proc/thread-self/io (syscr/syscw) of the measuring thread"
                    .into(),
                // The page-cache folios come from the first fill, not from
                // the trials' record-size rewrites in place.
                crate::experiments::common::util::layout_note(self.size),
            ],
            ..Default::default()
        })
    }
}
