//! Pacing one stream (record or playback) against its frame slots, and
//! where in the trial its misses fell.

use std::time::{Duration, Instant};

use crate::experiments::common::util::{frame_slot, sleep_until};
use crate::safety::signals;
use crate::stats::LatencyRecorder;

/// 10 ms frame-latency buckets: 0–9, 10–19, …, 90–99, 100+ ms.
pub(super) const BUCKET_NS: u64 = 10_000_000;
pub(super) const BUCKETS: usize = 11;

/// What one stream (record or playback) did in one trial.
pub(super) struct StreamOutcome {
    pub(super) lat: LatencyRecorder,
    pub(super) completed: u64,
    /// Frames completed within slot start + 1/fps (paced only), by the
    /// second of the frame's slot (frame i / fps): where in the trial the
    /// misses fell, so that a burst shows.
    pub(super) on_time_by_second: Vec<u64>,
    /// Seconds from t0 to the last completion.
    pub(super) last_done: f64,
}

impl StreamOutcome {
    /// Frames completed within slot start + 1/fps (paced only).
    pub(super) fn on_time(&self) -> u64 {
        self.on_time_by_second.iter().sum()
    }
}

/// The second of frame i's slot, counted from t0.
fn second_of(i: u64, fps: f64) -> usize {
    (i as f64 / fps) as usize
}

/// How many seconds (whole or begun) `frames` slots span.
fn seconds_of(frames: u64, fps: f64) -> usize {
    frames
        .checked_sub(1)
        .map_or(0, |last| second_of(last, fps) + 1)
}

/// Misses and frames due per second of both streams together: the blocks
/// whose spread tells a burst (one host stall late for 12 frames) from the
/// same misses scattered through the trial.
pub(super) fn misses_by_second(
    frames: u64,
    fps: f64,
    rec: &StreamOutcome,
    play: &StreamOutcome,
) -> Vec<(u64, u64)> {
    let mut due = vec![0u64; seconds_of(frames, fps)];
    for i in 0..frames {
        due[second_of(i, fps)] += 2;
    }
    due.iter()
        .enumerate()
        .map(|(b, &d)| (d - rec.on_time_by_second[b] - play.on_time_by_second[b], d))
        .collect()
}

/// Run one stream: `frames` frames, `op(i)` doing frame i. Paced: frame i
/// waits for its slot t0 + i/fps and its latency runs from that slot;
/// max: frames back to back, latency = service time. Stops early at
/// `hard_stop` (frames not started by then are simply not completed).
pub(super) fn run_stream(
    frames: u64,
    fps: f64,
    paced: bool,
    t0: Instant,
    hard_stop: Instant,
    mut op: impl FnMut(u64) -> std::io::Result<()>,
) -> std::io::Result<StreamOutcome> {
    let period = Duration::from_secs_f64(1.0 / fps);
    let mut out = StreamOutcome {
        lat: LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS),
        completed: 0,
        on_time_by_second: vec![0; seconds_of(frames, fps)],
        last_done: 0.0,
    };
    sleep_until(t0);
    for i in 0..frames {
        let slot = frame_slot(t0, fps, i);
        if paced {
            sleep_until(slot);
        }
        let now = Instant::now();
        if now >= hard_stop || signals::caught().is_some() {
            break;
        }
        let start = if paced { slot } else { now };
        op(i)?;
        let done = Instant::now();
        let lat = done.saturating_duration_since(start);
        out.lat.record(lat);
        out.completed += 1;
        if lat <= period {
            out.on_time_by_second[second_of(i, fps)] += 1;
        }
        out.last_done = (done - t0).as_secs_f64();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_are_counted_by_the_second_of_their_slot() {
        let outcome = |by_second: Vec<u64>| StreamOutcome {
            lat: LatencyRecorder::with_buckets(BUCKET_NS, BUCKETS),
            completed: by_second.iter().sum(),
            on_time_by_second: by_second,
            last_done: 0.0,
        };
        // 7 frames at 3 fps: slots in seconds 0, 0, 0, 1, 1, 1, 2.
        assert_eq!(seconds_of(7, 3.0), 3);
        assert_eq!(seconds_of(0, 3.0), 0);
        let (rec, play) = (outcome(vec![3, 1, 1]), outcome(vec![3, 3, 0]));
        // Both streams: 6, 6 and 2 due; second 1 lost 2 recorded frames,
        // second 2 the played one.
        assert_eq!(
            misses_by_second(7, 3.0, &rec, &play),
            vec![(0, 6), (2, 6), (1, 2)]
        );
    }

    #[test]
    fn paced_stream_counts_late_frames_from_the_slot() {
        let t0 = Instant::now();
        let far = t0 + Duration::from_secs(10);
        // Frame 2 stalls 150 ms: it and the frames queued behind it are late.
        let o = run_stream(6, 50.0, true, t0, far, |i| {
            if i == 2 {
                std::thread::sleep(Duration::from_millis(150));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(o.completed, 6);
        assert!(o.on_time() <= 3, "{}", o.on_time());
        // All six slots fall in the first second.
        assert_eq!(o.on_time_by_second.len(), 1);
        assert!(o.lat.to_data("x").max >= 0.15);
    }
}
