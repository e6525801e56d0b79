//! Small helpers shared by experiments: filling files, summing bytes so the
//! compiler cannot drop a read, calibrating batch sizes.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::engine::{
    Ctx, Experiment, Fitted, ParamValue, PointExtras, PointRun, Room, TrialValues,
};
use crate::safety::AlignedBuf;
use crate::units::{format_size, parse_size};
use crate::{Error, Result};

/// A size chosen for the room the machine has, and why when it is not the
/// one asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fit {
    pub(crate) value: u64,
    pub(crate) note: Option<String>,
}

impl Fit {
    /// The value asked for, unchanged: it fits.
    pub(crate) fn asked(requested: u64) -> Fit {
        Fit {
            value: requested,
            note: None,
        }
    }

    /// What the runner stores for a fitted parameter: the value used, so
    /// the point's params show what was measured (None: nothing changed).
    pub(crate) fn fitted(&self, param: &'static str, why: &str) -> Option<Fitted> {
        self.note.as_ref().map(|_| Fitted {
            param,
            used: ParamValue::Int(self.value),
            why: why.to_string(),
        })
    }
}

/// Fit `copies` buffers of `requested` bytes into the memory budget: the
/// largest multiple of `align` (at most `requested`) whose copies fit.
/// Below `floor` the point cannot run: an environment error saying why.
pub(crate) fn fit_memory(
    what: &str,
    requested: u64,
    copies: u64,
    align: u64,
    floor: u64,
    room: &Room,
) -> Result<Fit> {
    let Some(budget) = room.memory else {
        return Ok(Fit::asked(requested));
    };
    fit(
        what,
        requested,
        copies,
        align,
        floor,
        budget,
        "memory",
        &room.memory_why,
    )
}

/// Fit `copies` files of `requested` bytes into half the target's free
/// space (a board's flash is never filled).
pub(crate) fn fit_disk(
    what: &str,
    requested: u64,
    copies: u64,
    align: u64,
    floor: u64,
    room: &Room,
) -> Result<Fit> {
    let Some(free) = room.disk_free else {
        return Ok(Fit::asked(requested));
    };
    let why = format!("target has {} free; budget = half of it", format_size(free));
    let mut f = fit(
        what,
        requested,
        copies,
        align,
        floor,
        free / 2,
        "storage space",
        &why,
    )?;
    if let Some((max, fs)) = &room.max_file {
        if f.value > *max {
            let value = max / align.max(1) * align.max(1);
            f = Fit {
                value,
                note: Some(format!(
                    "fitted to the file system: {what} {} instead of {} ({fs} files are at most {})",
                    format_size(value),
                    format_size(requested),
                    format_size(*max)
                )),
            };
        }
    }
    Ok(f)
}

/// A file read from the page cache: `requested` bytes cut to a multiple of
/// `align` that both the memory budget (the file stays cached) and half the
/// free space hold; the notes say why when it was cut.
pub(crate) fn fit_cached_file(
    what: &str,
    requested: u64,
    align: u64,
    floor: u64,
    room: &Room,
) -> Result<(u64, Vec<String>)> {
    let in_memory = fit_memory(what, requested, 1, align, floor, room)?;
    let on_disk = fit_disk(what, in_memory.value, 1, align, floor, room)?;
    Ok((
        on_disk.value,
        in_memory.note.into_iter().chain(on_disk.note).collect(),
    ))
}

#[allow(clippy::too_many_arguments)]
fn fit(
    what: &str,
    requested: u64,
    copies: u64,
    align: u64,
    floor: u64,
    budget: u64,
    kind: &str,
    why: &str,
) -> Result<Fit> {
    let copies = copies.max(1);
    let align = align.max(1);
    if requested.saturating_mul(copies) <= budget {
        return Ok(Fit::asked(requested));
    }
    let value = budget / copies / align * align;
    if value < floor.max(1) {
        return Err(Error::environment(format!(
            "{what} needs at least {} of {kind}{} but the budget is {} ({why}); free some \
             {kind} or ask for less",
            format_size(floor.max(align).saturating_mul(copies)),
            if copies > 1 {
                format!(" ({copies} x {})", format_size(floor.max(align)))
            } else {
                String::new()
            },
            format_size(budget)
        )));
    }
    Ok(Fit {
        value,
        note: Some(format!(
            "fitted to the {kind} available: {what} {} instead of {}{} ({why})",
            format_size(value),
            format_size(requested),
            if copies > 1 {
                format!(" ({copies} copies)")
            } else {
                String::new()
            }
        )),
    })
}

/// A point that cannot run here (a mode the file system lacks): its trials
/// produce no metric and its notes say why, so the rest of the run and the
/// study go on.
pub(crate) struct Skipped(pub(crate) String);

impl PointRun for Skipped {
    fn trial(&mut self, _ctx: &Ctx) -> Result<TrialValues> {
        Ok(TrialValues::new())
    }
    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        Ok(PointExtras {
            notes: vec![format!("skipped: {}", self.0)],
            ..Default::default()
        })
    }
}

/// What stores the scratch files, for every storage result: a target that
/// no block device backs (tmpfs, ramfs, a network or FUSE file system) is
/// labelled, so RAM speed is never read as a device's.
pub(crate) fn backing_note(ctx: &Ctx) -> String {
    let dir = ctx.scratch_dir().unwrap_or(ctx.target.as_path());
    let mount = crate::system::mount_for_path(dir);
    let fs = mount
        .as_ref()
        .map_or("unknown".to_string(), |m| m.fs_type.clone());
    match (&ctx.device, backing_kind(&fs)) {
        (Some(d), _) => format!("backing: block device {} ({fs})", d.name),
        (None, Some(kind)) => format!(
            "backing: {fs} ({kind}), not a block device: the figures are {kind} speed, not a \
             device's"
        ),
        (None, None) => format!(
            "backing: {fs}, not a block device (no /sys/dev/block entry): the figures are not a \
             local device's"
        ),
    }
}

/// Names what a file system without a block device is backed by.
pub(crate) fn backing_kind(fs_type: &str) -> Option<&'static str> {
    match fs_type {
        "tmpfs" | "ramfs" | "shmem" | "devtmpfs" => Some("RAM"),
        "nfs" | "nfs4" | "cifs" | "smb3" | "9p" | "virtiofs" | "fuse" | "ceph" => {
            Some("network or host-shared")
        }
        "overlay" => Some("overlay of other file systems"),
        "ubifs" | "jffs2" => Some("raw flash (MTD)"),
        _ => None,
    }
}

/// When frame `i` of a stream at `fps` frames per second starting at `t0`
/// is due.
pub(crate) fn frame_slot(t0: Instant, fps: f64, i: u64) -> Instant {
    t0 + Duration::from_secs_f64(i as f64 / fps)
}

/// Sleep until `t` (at once if it has passed).
pub(crate) fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Waits for each frame's slot in turn and calls `frame(i, slot)` there,
/// until every frame is done, `frame` answers false, `hard_stop` passes or
/// a signal arrives; returns how many frames a stop abandoned.
pub(crate) fn pace_frames<E>(
    frames: u64,
    t0: Instant,
    fps: f64,
    hard_stop: Instant,
    mut frame: impl FnMut(u64, Instant) -> std::result::Result<bool, E>,
) -> std::result::Result<u64, E> {
    for i in 0..frames {
        let slot = frame_slot(t0, fps, i);
        sleep_until(slot);
        if Instant::now() >= hard_stop || crate::safety::signals::caught().is_some() {
            return Ok(frames - i);
        }
        if !frame(i, slot)? {
            break;
        }
    }
    Ok(0)
}

/// Read the first `size` bytes of `file` front to back in `buf`-sized
/// `read_at` calls, handing each piece read to `each`; a file shorter than
/// `size` is a measurement error.
pub(crate) fn read_through(
    file: &File,
    path: &Path,
    size: u64,
    buf: &mut [u8],
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let mut off = 0u64;
    while off < size {
        let n = file
            .read_at(buf, off)
            .map_err(|e| Error::io("cannot read", path, e))?;
        if n == 0 {
            return Err(Error::measurement(format!(
                "{} is shorter than expected",
                path.display()
            )));
        }
        each(&buf[..n])?;
        off += n as u64;
    }
    Ok(())
}

/// A fresh anonymous read-write mapping of `len` bytes; `sharing` is
/// `MapFlags::SHARED` (seen by forked children) or `MapFlags::PRIVATE`.
/// The caller owns it and unmaps it.
pub(crate) fn map_anonymous(
    len: usize,
    sharing: rustix::mm::MapFlags,
) -> std::io::Result<*mut std::ffi::c_void> {
    use rustix::mm::ProtFlags;
    // SAFETY: a new anonymous mapping (no file, no fixed address).
    let map = unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            sharing,
        )
    }?;
    Ok(map)
}

/// Makes every 512-byte sector of a block unique before it is written, as
/// fio does by default (scramble_buffers=1): the sector's file offset and a
/// sequence number (a pass id, an operation count) go into its first 16
/// bytes. Without it every block is the same buffer and a pass rewrites
/// identical data, which storage that deduplicates or skips identical
/// overwrites (ZFS nopwrite, a host caching a VM's disk) completes without
/// writing: measured ~3 GB/s vs fio's ~1 GB/s on a host-cached virtio disk.
/// Blocks under 16 bytes are left as they are.
pub(crate) fn stamp_sectors(block: &mut [u8], off: u64, seq: u64) {
    for (i, sector) in block.chunks_mut(512).enumerate() {
        if sector.len() >= 16 {
            sector[..8].copy_from_slice(&(off + i as u64 * 512).to_le_bytes());
            sector[8..16].copy_from_slice(&seq.to_le_bytes());
        }
    }
}

/// Sum a buffer as 64-bit words; `black_box` keeps the loads alive.
pub(crate) fn sum_bytes(buf: &[u8]) -> u64 {
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

/// Bytes per write() call of `fill_file`.
pub(crate) const FILL_WRITE: usize = 1 << 20;

/// How `fill_file` laid a file out, for the notes of experiments that read
/// it from the page cache: how fast cached reads go depends on it (on 6.x
/// kernels a file written in large pieces can sit in large page-cache
/// folios and read faster than one written 4 KiB at a time; lmbench's
/// bw_file_rd measured 1.7x apart for the same file content).
pub(crate) fn layout_note(size: u64) -> String {
    let kernel = crate::system::proc::read("sys/kernel/osrelease").unwrap_or_default();
    format!(
        "file layout: {} written sequentially with {} buffered write() calls, then read once \
         into the page cache; kernel {}: on 6.x kernels the page cache may hold such a file \
         in large folios, which read faster than a file written in small pieces (e.g. by \
         `head -c` or 4 KiB writes), so compare cached reads only between files laid out \
         the same way",
        format_size(size),
        format_size(FILL_WRITE as u64),
        kernel.trim()
    )
}

/// Write `size` bytes of random data to `file` in 1 MiB pieces, checking for
/// cancellation between pieces.
pub(crate) fn fill_file(file: &mut File, path: &Path, size: u64, seed: u64) -> Result<()> {
    let buf = AlignedBuf::random(FILL_WRITE, seed)?;
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

/// How many repetitions of `one` make a trial of at least the run's trial
/// time (at least 1), measured by running it once.
pub(crate) fn calibrate(ctx: &Ctx, mut one: impl FnMut() -> Result<()>) -> Result<u64> {
    let t = Instant::now();
    one()?;
    let dt = t.elapsed().as_secs_f64().max(1e-7);
    Ok(((ctx.trial_time().as_secs_f64() / dt).ceil() as u64).max(1))
}

/// Defaults follow the room a machine has, and so does anything up to the
/// default (a profile's smaller size): they are fitted. A size above the
/// default that exceeds the machine's whole memory (MemTotal) was typed by
/// someone who wants that much, so it is refused (usage error), never cut
/// silently from a terabyte to what fits.
pub(crate) fn refuse_beyond_ram(
    exp: &dyn Experiment,
    value: u64,
    param: &str,
    copies: u64,
    what: &str,
) -> Result<()> {
    let default = exp.spec().param(param).and_then(|s| parse_size(s.default));
    if default.is_some_and(|d| value <= d) {
        return Ok(());
    }
    let total = crate::system::proc::read("meminfo")
        .ok()
        .and_then(|m| crate::system::proc::keyed::kib_bytes(&m, "MemTotal"));
    match total {
        Some(total) if value.saturating_mul(copies) > total => Err(Error::usage(format!(
            "{} {param}={} needs {} of {what}, more than this machine's whole memory ({}); \
             use a smaller {param} (or leave it out: the default fits the memory available)",
            exp.name(),
            format_size(value),
            format_size(value.saturating_mul(copies)),
            format_size(total)
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_make_sectors_and_passes_unique() {
        let mut a = vec![7u8; 2048];
        stamp_sectors(&mut a, 4096, 1);
        let sectors: Vec<&[u8]> = a.chunks(512).collect();
        for i in 0..sectors.len() {
            for j in i + 1..sectors.len() {
                assert_ne!(sectors[i], sectors[j]);
            }
        }
        assert_eq!(&a[512..520], &(4096u64 + 512).to_le_bytes());
        let mut b = a.clone();
        stamp_sectors(&mut b, 4096, 2);
        assert_ne!(a, b);
        // Short blocks are stamped when they can hold a stamp, left alone otherwise.
        let mut c = vec![0u8; 100];
        stamp_sectors(&mut c, 8, 3);
        assert_eq!(&c[..8], &8u64.to_le_bytes());
        let mut d = vec![0u8; 8];
        stamp_sectors(&mut d, 8, 3);
        assert_eq!(d, [0u8; 8]);
    }

    fn room(memory: u64, disk: u64) -> Room {
        Room::fixture(memory, Some(disk))
    }

    #[test]
    fn what_fits_is_kept_what_does_not_is_shrunk_and_said() {
        let r = room(48 << 20, 100 << 20);
        let f = fit_memory("arrays", 16 << 20, 2, 4096, 1 << 20, &r).unwrap();
        assert_eq!(
            f,
            Fit {
                value: 16 << 20,
                note: None
            }
        );
        let f = fit_memory("arrays", 64 << 20, 2, 4096, 1 << 20, &r).unwrap();
        assert_eq!(f.value, 24 << 20);
        let n = f.note.unwrap();
        assert!(
            n.contains("24 MiB instead of 64 MiB") && n.contains("fixture"),
            "{n}"
        );
        // Alignment to a record size that does not divide the budget.
        let f = fit_disk("file", 1 << 30, 1, 3 << 20, 1, &r).unwrap();
        assert_eq!(f.value, 48 << 20);
        assert!(f.note.unwrap().contains("100 MiB free"));
        // Below the floor: an environment error (exit 4) naming the need.
        let e = fit_memory("arrays", 64 << 20, 3, 4096, 32 << 20, &r).unwrap_err();
        assert_eq!(e.exit_code(), 4);
        assert!(e.to_string().contains("3 x 32 MiB"), "{e}");
        // vfat holds files of at most 4 GiB − 1.
        let vfat = Room {
            max_file: Some(((4u64 << 30) - 1, "vfat".into())),
            ..room(1 << 30, 64 << 30)
        };
        let f = fit_disk("file", 8 << 30, 1, 1 << 20, 1 << 20, &vfat).unwrap();
        assert_eq!(f.value, (4u64 << 30) - (1 << 20));
        assert!(f.note.unwrap().contains("vfat files are at most"));
        // Unknown room: as asked.
        let f = fit_memory("x", 1 << 40, 1, 1, 1, &Room::default()).unwrap();
        assert_eq!(f.value, 1 << 40);
    }

    #[test]
    fn ram_and_network_backings_are_named() {
        assert_eq!(backing_kind("tmpfs"), Some("RAM"));
        assert_eq!(backing_kind("ubifs"), Some("raw flash (MTD)"));
        assert_eq!(backing_kind("ext4"), None);
    }

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
