//! Background sampler: vmstat + one disk's iostat + dirty state at a fixed
//! interval, recorded alongside a run.
//!
//! It must not disturb the measurement: one thread that sleeps between a few
//! cheap /proc reads, samples kept in memory, no output, no panics.

use serde::{Deserialize, Serialize};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::dirty::{self, DirtyState};
use super::iostat::{self, DiskCounters, IostatRow};
use super::vmstat::{self, VmstatCounters, VmstatRow};

/// A final partial interval shorter than this is dropped: its rates would
/// be too noisy to be worth keeping.
const MIN_FINAL: Duration = Duration::from_millis(200);

/// One monitor line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MonitorSample {
    /// Seconds since the sampler started, at the end of the sampled interval.
    pub(crate) t: f64,
    pub(crate) vmstat: VmstatRow,
    /// iostat -x for the sampler's device, when one was given and readable.
    pub(crate) disk: Option<IostatRow>,
    pub(crate) dirty: DirtyState,
}

/// Handle to the sampling thread. Dropping it stops the thread (samples are
/// discarded); call `stop()` to get them.
pub(crate) struct Sampler {
    stop_tx: Option<Sender<()>>,
    handle: Option<JoinHandle<Vec<MonitorSample>>>,
}

struct Reading {
    at: Instant,
    vm: VmstatCounters,
    disk: Option<DiskCounters>,
}

impl Reading {
    fn take(device: Option<&str>) -> Option<Reading> {
        let vm = vmstat::read().ok()?;
        let disk = device.and_then(|d| iostat::read_one(d).ok().flatten());
        Some(Reading {
            at: Instant::now(),
            vm,
            disk,
        })
    }
}

impl Sampler {
    /// Start sampling `device` (a kernel disk name such as "vda", or None for
    /// no iostat) every `interval`. A first reading is taken immediately; each
    /// later one yields a sample of the interval since the previous reading.
    pub(crate) fn start(device: Option<String>, interval: Duration) -> Sampler {
        let interval = interval.max(Duration::from_millis(10));
        let (tx, rx) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("tunelab-sampler".to_string())
            .spawn(move || run(device, interval, rx))
            .ok();
        Sampler {
            stop_tx: Some(tx),
            handle,
        }
    }

    /// Stop the thread (within a few ms) and return the samples, including a
    /// final partial interval if at least 0.2 s passed since the last sample.
    pub(crate) fn stop(mut self) -> Vec<MonitorSample> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Vec<MonitorSample> {
        if let Some(tx) = self.stop_tx.take() {
            let _ = tx.send(());
        }
        match self.handle.take() {
            Some(h) => h.join().unwrap_or_default(),
            None => Vec::new(),
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run(device: Option<String>, interval: Duration, rx: mpsc::Receiver<()>) -> Vec<MonitorSample> {
    let start = Instant::now();
    let dev = device.as_deref();
    let mut prev = Reading::take(dev);
    let mut samples = Vec::new();
    // Deadlines are start + k*interval so the rhythm does not drift by the
    // time spent reading.
    let mut next = start + interval;
    loop {
        let wait = next.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {
                sample(&mut prev, dev, start, &mut samples);
                next += interval;
                let now = Instant::now();
                if next <= now {
                    // We fell behind (suspended VM, starved thread): skip the
                    // missed ticks instead of sampling in a burst.
                    let behind = now.duration_since(next).as_nanos() / interval.as_nanos() + 1;
                    next += interval * behind.min(u32::MAX as u128) as u32;
                }
            }
            // Stop requested, or the Sampler was dropped without sending.
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                let last = prev.as_ref().map_or(start, |p| p.at);
                if last.elapsed() >= MIN_FINAL {
                    sample(&mut prev, dev, start, &mut samples);
                }
                return samples;
            }
        }
    }
}

/// Take a reading and, if there is a previous one, push the interval's sample.
/// Read errors skip the sample; the previous reading is kept so the next
/// sample simply covers a longer interval.
fn sample(
    prev: &mut Option<Reading>,
    dev: Option<&str>,
    start: Instant,
    out: &mut Vec<MonitorSample>,
) {
    let Some(cur) = Reading::take(dev) else {
        return;
    };
    if let Some(p) = prev.as_ref() {
        let secs = cur.at.duration_since(p.at).as_secs_f64();
        if secs > 0.0 {
            if let Ok(dirty) = dirty::read() {
                let disk = match (&p.disk, &cur.disk) {
                    (Some(a), Some(b)) => Some(iostat::delta(a, b, secs)),
                    _ => None,
                };
                out.push(MonitorSample {
                    t: cur.at.duration_since(start).as_secs_f64(),
                    vmstat: vmstat::delta(&p.vm, &cur.vm, secs),
                    disk,
                    dirty,
                });
            }
        }
    }
    *prev = Some(cur);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_every_interval_and_stops_promptly() {
        let dev = crate::system::device_for_path(std::path::Path::new("/")).map(|d| d.disk);
        let s = Sampler::start(dev.clone(), Duration::from_millis(100));
        std::thread::sleep(Duration::from_millis(350));
        let t = Instant::now();
        let samples = s.stop();
        assert!(
            t.elapsed() < Duration::from_millis(50),
            "stop took {:?}",
            t.elapsed()
        );
        assert!(
            (3..=4).contains(&samples.len()),
            "{} samples",
            samples.len()
        );
        let mut last_t = 0.0;
        for s in &samples {
            assert!(s.t > last_t && s.t < 1.0);
            last_t = s.t;
            let v = &s.vmstat;
            let cpu = v.us + v.sy + v.id + v.wa + v.st;
            assert!((95.0..=105.0).contains(&cpu), "cpu sums to {cpu}");
            assert!(v.free_kb > 0 && v.in_s >= 0.0 && v.cs_s > 0.0);
            assert!(s.dirty.threshold_bytes > 0);
            if dev.is_some() {
                let d = s.disk.as_ref().expect("disk row");
                assert!((0.0..=100.0).contains(&d.util_pct));
            }
        }
    }

    #[test]
    fn final_partial_sample_and_drop() {
        let s = Sampler::start(None, Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(250));
        let samples = s.stop();
        assert_eq!(samples.len(), 1);
        assert!(samples[0].disk.is_none());

        let s = Sampler::start(None, Duration::from_secs(10));
        assert!(s.stop().is_empty()); // < 0.2 s: no partial sample

        let t = Instant::now();
        drop(Sampler::start(
            Some("no-such-disk".into()),
            Duration::from_secs(10),
        ));
        assert!(t.elapsed() < Duration::from_millis(100));
    }
}
