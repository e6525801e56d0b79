//! Small helpers shared by experiments: filling files, summing bytes so the
//! compiler cannot drop a read, calibrating batch sizes.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::safety::AlignedBuf;
use crate::{Error, Result};

/// Shortest time one trial should take; shorter work is batched.
/// When frame `i` of a stream at `fps` frames per second starting at `t0`
/// is due.
pub fn frame_slot(t0: Instant, fps: f64, i: u64) -> Instant {
    t0 + Duration::from_secs_f64(i as f64 / fps)
}

/// Sleep until `t` (at once if it has passed).
pub fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

pub const MIN_TRIAL: Duration = Duration::from_millis(200);

/// Sum a buffer as 64-bit words; `black_box` keeps the loads alive.
pub fn sum_bytes(buf: &[u8]) -> u64 {
    let mut acc = 0u64;
    let mut chunks = buf.chunks_exact(8);
    for c in &mut chunks {
        acc = acc.wrapping_add(u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])));
    }
    for &b in chunks.remainder() {
        acc = acc.wrapping_add(b as u64);
    }
    std::hint::black_box(acc)
}

/// Write `size` bytes of random data to `file` in 1 MiB pieces, checking for
/// cancellation between pieces.
pub fn fill_file(file: &mut File, path: &Path, size: u64, seed: u64) -> Result<()> {
    let buf = AlignedBuf::random(1 << 20, seed)?;
    let mut left = size;
    while left > 0 {
        crate::safety::signals::check()?;
        let n = left.min(buf.len() as u64) as usize;
        file.write_all(&buf.as_slice()[..n])
            .map_err(|e| Error::io("cannot write", path, e))?;
        left -= n as u64;
    }
    Ok(())
}

/// How many repetitions of `one` make a trial of at least `MIN_TRIAL`
/// (at least 1), measured by running it once.
pub fn calibrate(mut one: impl FnMut() -> Result<()>) -> Result<u64> {
    let t = Instant::now();
    one()?;
    let dt = t.elapsed().as_secs_f64().max(1e-7);
    Ok(((MIN_TRIAL.as_secs_f64() / dt).ceil() as u64).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_counts_every_byte() {
        let v: Vec<u8> = (0..=20u8).collect();
        let expect: u64 = {
            let mut a = 0u64;
            for c in v.chunks_exact(8) {
                a = a.wrapping_add(u64::from_ne_bytes(c.try_into().unwrap()));
            }
            a + 16 + 17 + 18 + 19 + 20
        };
        assert_eq!(sum_bytes(&v), expect);
    }
}
