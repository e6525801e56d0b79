//! The fake-capacity check (f3write then f3read): write `size` bytes of
//! blocks that each name their own position, flush, then read every block
//! back and sort it: intact, overwritten (it holds another position's
//! block: the device wraps addresses past its real size, as most
//! counterfeit cards do) or corrupted (anything else: zeros, garbage). The
//! real capacity is the bytes that read back intact — with a wrapping card
//! the last writes win, so exactly its real size survives.

use super::{Cancel, FlashIo};
use crate::Result;

/// Bytes every block starts with: a tag, then its own position.
const HEADER: usize = 16;
const TAG: u64 = 0x7475_6e65_6c61_6233; // "tunelab3"

/// What the read-back found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) written: u64,
    pub(crate) intact: u64,
    /// Blocks holding another position's data (addresses wrap).
    pub(crate) overwritten: u64,
    /// Blocks holding neither (lost or damaged data).
    pub(crate) corrupted: u64,
    /// Position of the first block that did not read back intact.
    pub(crate) first_bad: Option<u64>,
    /// The least distance between an overwritten block and the position
    /// whose data it holds: the wrap (the real size; others are multiples).
    pub(crate) wrap: Option<u64>,
    pub(crate) write_seconds: f64,
    pub(crate) read_seconds: f64,
    /// (bytes done, rate B/s) per progress step of each phase.
    pub(crate) write_rates: Vec<(f64, f64)>,
    pub(crate) read_rates: Vec<(f64, f64)>,
}

impl Verdict {
    /// The bytes the device really holds: what read back intact.
    pub(crate) fn real_capacity(&self) -> u64 {
        self.intact
    }
    pub(crate) fn is_fake(&self) -> bool {
        self.intact < self.written
    }
}

/// Phase and bytes done, for a progress display.
pub(crate) type Progress<'a> = &'a mut dyn FnMut(&str, u64, u64);

/// Fill `block` (its len a multiple of 8) with the pattern of `pos`.
pub(crate) fn pattern(block: &mut [u8], pos: u64, seed: u64) {
    block[..8].copy_from_slice(&TAG.to_le_bytes());
    block[8..16].copy_from_slice(&pos.to_le_bytes());
    // xorshift64 keyed by seed and position: every block differs.
    let mut x = (pos ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for w in block[HEADER..].chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.copy_from_slice(&x.to_le_bytes());
    }
}

/// Write `size` bytes (whole blocks) to `io`, flush, read them back.
/// `scratch` holds one block (aligned for O_DIRECT); `expect` another.
pub(crate) fn fill_and_verify(
    io: &mut dyn FlashIo,
    size: u64,
    scratch: &mut [u8],
    expect: &mut [u8],
    seed: u64,
    progress: Progress,
    cancel: Cancel,
) -> Result<Verdict> {
    let block = scratch.len() as u64;
    let mut blocks = size / block;
    let step = (blocks / 64).max(1);
    let mut v = Verdict::default();
    let t0 = io.now();
    let mut last = (t0, 0u64);
    for i in 0..blocks {
        cancel()?;
        // `len` shrinks when the file system says it is full (f3write
        // stops there too): what was written is still verified.
        if (i + 1) * block > io.len() {
            blocks = i;
            break;
        }
        pattern(scratch, i * block, seed);
        io.write_at(scratch, i * block)?;
        if (i + 1) * block > io.len() {
            blocks = i;
            break;
        }
        if (i + 1) % step == 0 || i + 1 == blocks {
            let (now, done) = (io.now(), (i + 1) * block);
            rate_point(&mut v.write_rates, last, (now, done));
            last = (now, done);
            progress("write", done, blocks * block);
        }
    }
    v.written = blocks * block;
    io.flush()?;
    let t1 = io.now();
    v.write_seconds = t1 - t0;
    let mut last = (t1, 0u64);
    for i in 0..blocks {
        cancel()?;
        let pos = i * block;
        io.read_at(scratch, pos)?;
        pattern(expect, pos, seed);
        if scratch == expect {
            v.intact += block;
        } else {
            v.first_bad.get_or_insert(pos);
            match holds(scratch, pos, block, seed, expect) {
                Some(other) => {
                    v.overwritten += block;
                    let d = other.abs_diff(pos);
                    v.wrap = Some(v.wrap.map_or(d, |w| w.min(d)));
                }
                None => v.corrupted += block,
            }
        }
        if (i + 1) % step == 0 || i + 1 == blocks {
            let (now, done) = (io.now(), (i + 1) * block);
            rate_point(&mut v.read_rates, last, (now, done));
            last = (now, done);
            progress("verify", done, v.written);
        }
    }
    v.read_seconds = io.now() - t1;
    Ok(v)
}

/// The position whose intact block `got` is, if another one's.
fn holds(got: &[u8], pos: u64, block: u64, seed: u64, expect: &mut [u8]) -> Option<u64> {
    let tag = u64::from_le_bytes(got[..8].try_into().ok()?);
    let other = u64::from_le_bytes(got[8..16].try_into().ok()?);
    if tag != TAG || other == pos || other % block != 0 {
        return None;
    }
    pattern(expect, other, seed);
    (got == &expect[..]).then_some(other)
}

fn rate_point(rates: &mut Vec<(f64, f64)>, (t0, b0): (f64, u64), (t1, b1): (f64, u64)) {
    if t1 > t0 {
        rates.push((b1 as f64, (b1 - b0) as f64 / (t1 - t0)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A card that keeps `real` bytes: past them it wraps, or drops writes.
    struct Fake {
        data: Vec<u8>,
        stated: u64,
        wraps: bool,
    }

    impl FlashIo for Fake {
        fn len(&self) -> u64 {
            self.stated
        }
        fn read_at(&mut self, buf: &mut [u8], off: u64) -> Result<()> {
            let real = self.data.len() as u64;
            if !self.wraps && off >= real {
                buf.fill(0);
            } else {
                let o = (off % real) as usize;
                buf.copy_from_slice(&self.data[o..o + buf.len()]);
            }
            Ok(())
        }
        fn write_at(&mut self, buf: &[u8], off: u64) -> Result<()> {
            let real = self.data.len() as u64;
            if self.wraps || off < real {
                let o = (off % real) as usize;
                self.data[o..o + buf.len()].copy_from_slice(buf);
            }
            Ok(())
        }
        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
        fn now(&self) -> f64 {
            0.0
        }
    }

    fn check(real: u64, stated: u64, wraps: bool) -> Verdict {
        let mut f = Fake {
            data: vec![0; real as usize],
            stated,
            wraps,
        };
        let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
        fill_and_verify(
            &mut f,
            stated,
            &mut a,
            &mut b,
            7,
            &mut |_, _, _| {},
            &|| Ok(()),
        )
        .unwrap()
    }

    #[test]
    fn an_honest_card_reads_back_everything() {
        let v = check(1 << 20, 1 << 20, true);
        assert!(!v.is_fake());
        assert_eq!(v.real_capacity(), 1 << 20);
        assert_eq!(v.first_bad, None);
    }

    #[test]
    fn a_wrapping_card_keeps_its_real_size_and_shows_the_wrap() {
        let v = check(768 << 10, 2 << 20, true);
        assert!(v.is_fake());
        assert_eq!(v.real_capacity(), 768 << 10);
        assert_eq!(v.wrap, Some(768 << 10));
        assert_eq!(v.overwritten, (2 << 20) - (768 << 10));
        assert_eq!(v.first_bad, Some(0));
    }

    #[test]
    fn a_fill_that_finds_the_file_system_full_verifies_what_it_wrote() {
        struct Full(Fake, u64);
        impl FlashIo for Full {
            fn len(&self) -> u64 {
                self.1
            }
            fn read_at(&mut self, b: &mut [u8], o: u64) -> Result<()> {
                self.0.read_at(b, o)
            }
            fn write_at(&mut self, b: &[u8], o: u64) -> Result<()> {
                self.0.write_at(b, o)
            }
            fn flush(&mut self) -> Result<()> {
                Ok(())
            }
            fn now(&self) -> f64 {
                0.0
            }
        }
        let fake = Fake {
            data: vec![0; 1 << 20],
            stated: 1 << 20,
            wraps: true,
        };
        let mut f = Full(fake, 512 << 10);
        let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
        let v = fill_and_verify(
            &mut f,
            1 << 20,
            &mut a,
            &mut b,
            7,
            &mut |_, _, _| {},
            &|| Ok(()),
        )
        .unwrap();
        assert_eq!(v.written, 512 << 10);
        assert!(!v.is_fake());
    }

    #[test]
    fn a_card_that_drops_writes_past_its_size_is_corrupted_there() {
        let v = check(1 << 20, 3 << 20, false);
        assert_eq!(v.real_capacity(), 1 << 20);
        assert_eq!(v.corrupted, 2 << 20);
        assert_eq!(v.first_bad, Some(1 << 20));
        assert_eq!(v.wrap, None);
    }
}
