//! Unit boundaries from read timing, flashbench's `-a` method automated.
//! For a candidate size `c`, blocks of 2·S bytes are read around odd
//! multiples `b` of `c`: `pre` ends at `b`, `on` straddles it, `post`
//! starts at it. Only `on` can cross a boundary of a unit larger than S,
//! and it does for every unit size that divides `b`, that is every unit no
//! larger than `c`: diff(c) = on − (pre+post)/2 grows by one step at each
//! unit size (page, allocation unit) and stays flat in between. The
//! largest significant step is the allocation unit, the smallest (when
//! another) the page.

use super::{Cancel, FlashIo};
use crate::Result;

/// What to read.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Half the block read (S); candidates start at 2·S.
    pub(crate) half: u64,
    /// Largest candidate tried.
    pub(crate) max: u64,
    /// Boundaries sampled per candidate (spread over the device).
    pub(crate) positions: usize,
    /// Times each pre/on/post triple is read.
    pub(crate) repeats: usize,
}

impl Default for Plan {
    fn default() -> Plan {
        Plan {
            half: 4096,
            max: 64 << 20,
            positions: 8,
            repeats: 4,
        }
    }
}

/// One candidate size and what reading across its multiples cost.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub(crate) size: u64,
    /// Median extra time of a read that straddles a multiple of `size` (s).
    pub(crate) diff: f64,
    /// Standard error of that median, from the spread of the samples (s).
    pub(crate) noise: f64,
    /// diff(size) − diff(size/2): the step this size adds (s).
    pub(crate) step: f64,
    pub(crate) significant: bool,
}

#[derive(Clone, Debug)]
pub struct Found {
    pub candidates: Vec<Candidate>,
    /// The allocation unit: the largest significant step.
    pub unit: Option<u64>,
    /// The page: the smallest significant step, when smaller than the unit.
    pub page: Option<u64>,
    /// The unit's step over its noise (capped at 1000).
    pub(crate) snr: f64,
}

/// Read every candidate and decide. `buf` must hold 2·S bytes (aligned for
/// O_DIRECT by the caller).
pub fn find(io: &mut dyn FlashIo, plan: &Plan, buf: &mut [u8], cancel: Cancel) -> Result<Found> {
    let s = plan.half;
    let block = (2 * s) as usize;
    let mut candidates = Vec::new();
    let mut c = 2 * s;
    while c <= plan.max && c + 2 * s <= io.len() {
        let odd = ((io.len() - 2 * s) / c).div_ceil(2).max(1);
        let n = (plan.positions as u64).min(odd);
        let mut samples = Vec::new();
        for k in 0..n {
            let m = k * odd / n;
            let b = c * (2 * m + 1);
            for _ in 0..plan.repeats {
                cancel()?;
                let pre = timed_read(io, &mut buf[..block], b - 2 * s)?;
                let on = timed_read(io, &mut buf[..block], b - s)?;
                let post = timed_read(io, &mut buf[..block], b)?;
                samples.push(on - (pre + post) / 2.0);
            }
        }
        let (diff, noise) = median_and_error(&mut samples);
        candidates.push(Candidate {
            size: c,
            diff,
            noise,
            step: 0.0,
            significant: false,
        });
        c *= 2;
    }
    Ok(decide(candidates))
}

fn timed_read(io: &mut dyn FlashIo, buf: &mut [u8], offset: u64) -> Result<f64> {
    let t0 = io.now();
    io.read_at(buf, offset)?;
    Ok(io.now() - t0)
}

/// Median and the standard error of the median (1.253·σ/√n, σ from the MAD).
fn median_and_error(v: &mut [f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let med = median(v);
    let mut dev: Vec<f64> = v.iter().map(|x| (x - med).abs()).collect();
    let sigma = 1.4826 * median(&mut dev);
    (med, 1.253 * sigma / (v.len() as f64).sqrt())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A step counts when it is above four standard errors of the two diffs it
/// joins and above a tenth of the largest diff (so a noiseless clock does
/// not make every rounding a step).
pub(crate) fn decide(mut candidates: Vec<Candidate>) -> Found {
    let top = candidates.iter().map(|c| c.diff).fold(0.0, f64::max);
    let mut prev = (0.0, 0.0);
    for c in candidates.iter_mut() {
        c.step = c.diff - prev.0;
        let noise = (c.noise.powi(2) + prev.1 * prev.1).sqrt();
        c.significant = top > 0.0 && c.step > 4.0 * noise && c.step > 0.1 * top;
        prev = (c.diff, c.noise);
    }
    let sig: Vec<&Candidate> = candidates.iter().filter(|c| c.significant).collect();
    let unit = sig.last().map(|c| c.size);
    let page = sig.first().map(|c| c.size).filter(|p| Some(*p) != unit);
    let snr = sig.last().map_or(0.0, |c| {
        if c.noise > 0.0 {
            (c.step / c.noise).min(1000.0)
        } else {
            1000.0
        }
    });
    Found {
        candidates,
        unit,
        page,
        snr,
    }
}

/// Where a partition and its file system's data area sit against the unit.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Alignment {
    pub(crate) partition: String,
    pub(crate) start: u64,
    /// The data area's offset from the partition start, when known (FAT).
    pub(crate) data: Option<u64>,
    pub(crate) unit: u64,
}

impl Alignment {
    pub(crate) fn aligned(&self) -> bool {
        self.start.is_multiple_of(self.unit)
            && self
                .data
                .is_none_or(|d| (self.start + d).is_multiple_of(self.unit))
    }

    /// What is off and the command that fixes it.
    pub(crate) fn verdict(&self) -> String {
        let unit_s = self.unit / 512;
        if !self.start.is_multiple_of(self.unit) {
            let next = self.start.div_ceil(self.unit) * self.unit / 512;
            return format!(
                "{} starts at byte {} ({} KiB into a {} KiB unit): misaligned; recreate it \
                 at a multiple of the unit, e.g. sfdisk with 'start={next}' (sectors), or \
                 'sfdisk --align' with the grain set to {unit_s} sectors",
                self.partition,
                self.start,
                (self.start % self.unit) >> 10,
                self.unit >> 10
            );
        }
        match self.data {
            Some(d) if d % self.unit != 0 => format!(
                "{}: the FAT data area starts {} KiB into the partition, not on a {} KiB \
                 unit: every cluster straddles units; reformat with 'mkfs.fat -a' and \
                 reserved sectors chosen so the data area lands on a unit ('-R' so that \
                 reserved + FATs = a multiple of {unit_s} sectors)",
                self.partition,
                d >> 10,
                self.unit >> 10
            ),
            _ => format!(
                "{} starts on a unit boundary (byte {}){}",
                self.partition,
                self.start,
                if self.data.is_some() {
                    ", and so does its FAT data area"
                } else {
                    ""
                }
            ),
        }
    }
}

/// Offset of a FAT file system's data area (first cluster) from the start
/// of its boot sector, or None when the sector is not a FAT boot sector.
pub(crate) fn fat_data_offset(boot: &[u8]) -> Option<u64> {
    if boot.len() < 512 || boot[510] != 0x55 || boot[511] != 0xAA {
        return None;
    }
    let le16 = |i: usize| u64::from(u16::from_le_bytes([boot[i], boot[i + 1]]));
    let le32 = |i: usize| {
        u64::from(u32::from_le_bytes([
            boot[i],
            boot[i + 1],
            boot[i + 2],
            boot[i + 3],
        ]))
    };
    let bps = le16(11);
    let spc = u64::from(boot[13]);
    let reserved = le16(14);
    let fats = u64::from(boot[16]);
    let root_entries = le16(17);
    let fat_size = match le16(22) {
        0 => le32(36),
        n => n,
    };
    if !matches!(bps, 512 | 1024 | 2048 | 4096) || spc == 0 || fats == 0 || reserved == 0 {
        return None;
    }
    let root_sectors = (root_entries * 32).div_ceil(bps);
    Some((reserved + fats * fat_size + root_sectors) * bps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(size: u64, diff: f64) -> Candidate {
        Candidate {
            size,
            diff,
            noise: 0.0,
            step: 0.0,
            significant: false,
        }
    }

    #[test]
    fn the_largest_step_is_the_unit_and_the_first_the_page() {
        let c = vec![
            cand(8 << 10, 0.0),
            cand(16 << 10, 20e-6),
            cand(32 << 10, 20e-6),
            cand(4 << 20, 20e-6),
            cand(8 << 20, 120e-6),
            cand(16 << 20, 121e-6),
        ];
        let f = decide(c);
        assert_eq!(f.unit, Some(8 << 20));
        assert_eq!(f.page, Some(16 << 10));
    }

    #[test]
    fn noise_hides_a_small_step() {
        let mut c = vec![cand(8 << 10, 0.0), cand(16 << 10, 20e-6)];
        c[1].noise = 10e-6;
        assert_eq!(decide(c).unit, None);
    }

    #[test]
    fn fat_data_area_and_alignment() {
        let mut b = vec![0u8; 512];
        b[11..13].copy_from_slice(&512u16.to_le_bytes());
        b[13] = 8;
        b[14..16].copy_from_slice(&32u16.to_le_bytes());
        b[16] = 2;
        b[36..40].copy_from_slice(&1000u32.to_le_bytes());
        b[510] = 0x55;
        b[511] = 0xAA;
        let d = fat_data_offset(&b).unwrap();
        assert_eq!(d, (32 + 2000) * 512);
        let a = Alignment {
            partition: "p1".into(),
            start: 4 << 20,
            data: Some(d),
            unit: 4 << 20,
        };
        assert!(!a.aligned());
        assert!(a.verdict().contains("mkfs.fat"), "{}", a.verdict());
        let b = Alignment {
            start: 63 * 512,
            data: None,
            ..a.clone()
        };
        assert!(b.verdict().contains("start=8192"), "{}", b.verdict());
        assert!(Alignment { data: None, ..a }.aligned());
        assert_eq!(fat_data_offset(&[0u8; 512]), None);
    }
}
