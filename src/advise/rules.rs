//! The rules, one function each. A rule returns a finding, a gap (it needed
//! evidence that is not there), or nothing when the configuration is fine.

use super::{Evidence, Finding, Severity, Workload};
use crate::experiments::io::{api as io_api, pregrow};
use crate::units::format_size;
use crate::units::human;

pub(crate) enum Outcome {
    Finding(Box<Finding>),
    Gap(String),
    Fine,
}

type Rule = fn(&Evidence, Workload) -> Outcome;

pub(crate) const ALL: &[Rule] = &[
    sync_mount,
    strict_atime,
    usb_link_speed,
    usb_storage_links,
    usb_storage_driver,
    dirty_limit_vs_device,
    dirty_limit_too_small,
    read_ahead,
    scheduler,
    governor,
    stdio_buffer,
    pregrow,
    random_io::saturating_depth,
    random_io::scheduler,
    diagnose::kernel_bound,
    diagnose::slab_slow_path,
    diagnose::hot_lock,
    diagnose::blocking_cause,
    latency::spike_culprit,
    cpu::clock_below_max,
    diagnose::cpu_hotspot,
    diagnose::user_lock,
    diagnose::storage_sync,
    diagnose::sleep_bound,
    diagnose::fault_churn_rule,
    diagnose::small_io_rule,
    diagnose::cpu_starvation,
    diagnose::memory_pressure,
    flash::misaligned,
    flash::streams_vs_open_units,
    flash::dirty_vs_card_cache,
    flash::recorder_above_steady,
];

/// Seconds of device writes the dirty limit may hold before it is a stall risk.
pub(crate) const STALL_SECONDS: f64 = 5.0;

impl From<Finding> for Outcome {
    fn from(f: Finding) -> Self {
        Outcome::Finding(Box::new(f))
    }
}

fn fact(ev: &Evidence, key: &str) -> String {
    let f = ev.facts.0.iter().find(|f| f.key == key);
    f.map(|f| format!("{key} = {} ({})", f.value, f.source))
        .unwrap_or_else(|| format!("{key} unknown"))
}

fn mount_point(ev: &Evidence) -> &str {
    ev.facts.get("fs.mount_point").unwrap_or("MOUNTPOINT")
}

fn target(ev: &Evidence) -> &str {
    ev.facts.get("fs.path").unwrap_or("DIR")
}

/// A loop device's queue settings do not reach the disk behind it.
fn on_loop_device(ev: &Evidence) -> bool {
    ev.facts
        .get("block.kind")
        .is_some_and(|k| k.starts_with("loop"))
}

fn sync_mount(ev: &Evidence, _: Workload) -> Outcome {
    if ev.facts.get("fs.sync") != Some("sync") {
        return Outcome::Fine;
    }
    let mp = mount_point(ev);
    Finding::new("mount.sync", Severity::Warning, format!("{mp} is mounted sync: every write waits for the device"))
        .evidence(vec![fact(ev, "fs.options")])
        .why("With `sync` each write() returns only after the data and metadata reach the device, so \
              small writes run at the device's latency instead of memory speed, and flash wears faster.")
        .fix(
            format!("mount -o remount,async {mp}   (and drop `sync` from /etc/fstab)"),
            "After a power cut, up to vm.dirty_expire_centisecs of recent writes can be lost; \
               applications that need durability must fsync() themselves.",
        )
        .verify(format!("tunelab tune mount --values sync,async --experiment io.metadata --target {}", target(ev)))
        .into()
}

fn strict_atime(ev: &Evidence, _: Workload) -> Outcome {
    let mode = ev.facts.get("fs.atime").unwrap_or("");
    if !mode.starts_with("strictatime") {
        return Outcome::Fine;
    }
    let mp = mount_point(ev);
    Finding::new("mount.strictatime", Severity::Warning, format!("{mp} updates the access time on every read (strictatime)"))
        .evidence(vec![fact(ev, "fs.atime")])
        .why("Every read of a file dirties its inode, turning read-mostly workloads into a stream of \
              small metadata writes.")
        .fix(
            format!("mount -o remount,relatime {mp}   (or noatime; and update /etc/fstab)"),
            "Programs that rely on exact access times (some mail readers, tmp cleaners) see \
               relatime's coarser updates; noatime disables them.",
        )
        .verify(format!(
            "tunelab run io.atime --target {}   or   tunelab tune mount --values strictatime,relatime,noatime --experiment io.atime --target {}",
            target(ev),
            target(ev)
        ))
        .into()
}

fn usb_link_speed(ev: &Evidence, _: Workload) -> Outcome {
    let (Some(speed), Some(version)) = (
        ev.facts.get_u64("usb.speed_mbps"),
        ev.facts.get("usb.version"),
    ) else {
        return Outcome::Fine;
    };
    let major: f64 = version.trim().parse().unwrap_or(0.0);
    if major < 3.0 || speed > 480 {
        return Outcome::Fine;
    }
    Finding::new(
        "usb.link-speed",
        Severity::Warning,
        format!("a USB {version} device negotiated only {speed} Mb/s"),
    )
    .evidence(vec![fact(ev, "usb.version"), fact(ev, "usb.speed_mbps")])
    .why(
        "The device supports SuperSpeed but the link runs at USB 2 speed (cable, hub or port), \
              capping throughput near 40 MB/s.",
    )
    .fix(
        "plug the device into a USB 3 port with a USB 3 cable (blue/SS-marked); check `lsusb -t`",
        "none",
    )
    .verify(format!(
        "tunelab run io.record-size -p mode=direct -p record=1m --target {}",
        target(ev)
    ))
    .into()
}

/// Every USB storage device on the machine, not only the target's: a USB 3
/// device enumerated at USB 2 speed (the seed study's "enumerate as a
/// super-speed device" check).
fn usb_storage_links(ev: &Evidence, _: Workload) -> Outcome {
    let slow = crate::system::board::slow_usb3_links(&ev.facts);
    // The target's own device is reported by usb_link_speed already.
    let target_slow = matches!(usb_link_speed(ev, Workload::General), Outcome::Finding(_));
    if slow.is_empty() || (target_slow && slow.len() == 1) {
        return Outcome::Fine;
    }
    let evidence = slow
        .iter()
        .map(|(dev, _, _)| fact(ev, &format!("usb.{dev}.storage")))
        .collect();
    let devs: Vec<String> = slow
        .iter()
        .map(|(dev, v, speed)| format!("{dev} (USB {v} at {speed} Mb/s)"))
        .collect();
    Finding::new(
        "usb.storage-link-speed",
        Severity::Warning,
        format!("USB 3 storage running at USB 2 speed: {}", devs.join(", ")),
    )
    .evidence(evidence)
    .why(
        "These devices support SuperSpeed (5000 Mb/s or more) but enumerated at high speed \
              (480 Mb/s) — a USB 2 port, hub or cable — which caps them near 40 MB/s.",
    )
    .fix(
        "plug them into a USB 3 port with a USB 3 cable (blue/SS-marked); check with \
                  `cat /sys/bus/usb/devices/BUSID/speed` (5000 = SuperSpeed)",
        "none",
    )
    .verify(
        "tunelab inspect   (the usb.BUSID.speed_mbps fact), then tunelab run io.record-size \
                 -p mode=direct --target A_DIR_ON_THE_DEVICE",
    )
    .into()
}

fn usb_storage_driver(ev: &Evidence, _: Workload) -> Outcome {
    if ev.facts.get("usb.driver") != Some("usb-storage") {
        return Outcome::Fine;
    }
    let major: f64 = ev
        .facts
        .get("usb.version")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0);
    if major < 3.0 {
        return Outcome::Fine;
    }
    Finding::new("usb.uas", Severity::Info, "USB 3 storage uses the usb-storage (BOT) driver, not uas")
        .evidence(vec![fact(ev, "usb.driver"), fact(ev, "usb.version"), fact(ev, "usb.uas_available")])
        .why("uas queues several commands at once; the bulk-only usb-storage protocol runs one at a \
              time, which costs throughput and latency on USB 3 devices that support uas.")
        .fix(
            "modprobe uas; check for a usb-storage quirk (`cat /sys/module/usb_storage/parameters/quirks`) \
                  that disables uas for this device",
            "Some bridges have broken uas firmware: that is why quirks exist; test before keeping it.",
        )
        .verify(format!("tunelab run io.record-size -p mode=direct --target {}", target(ev)))
        .into()
}

/// The dirty limit in bytes: dirty_bytes when set, else the kernel's computed
/// threshold, else dirty_ratio % of available memory.
pub(crate) fn dirty_limit(ev: &Evidence) -> Option<(u64, String)> {
    let f = &ev.facts;
    if let Some(b) = f.get_u64("vm.dirty_bytes").filter(|b| *b > 0) {
        return Some((b, fact(ev, "vm.dirty_bytes")));
    }
    if let Some(t) = f.get_u64("vm.nr_dirty_threshold_bytes") {
        return Some((
            t,
            format!(
                "{} (with {})",
                fact(ev, "vm.nr_dirty_threshold_bytes"),
                fact(ev, "vm.dirty_ratio")
            ),
        ));
    }
    let ratio = f.get_u64("vm.dirty_ratio")?;
    let avail = f.get_u64("mem.available_bytes")?;
    Some((
        avail * ratio / 100,
        format!(
            "{} of {}",
            fact(ev, "vm.dirty_ratio"),
            fact(ev, "mem.available_bytes")
        ),
    ))
}

fn dirty_limit_vs_device(ev: &Evidence, _: Workload) -> Outcome {
    let Some((limit, limit_src)) = dirty_limit(ev) else {
        return Outcome::Gap("dirty limits could not be read".into());
    };
    let Some(rate) = &ev.write_throughput else {
        return Outcome::Gap(format!(
            "no measured write throughput for this device, so the dirty limit ({}) cannot be judged: run \
             `tunelab run io.record-size -p mode=direct -p record=1m --target {}`",
            format_size(limit),
            target(ev)
        ));
    };
    let seconds = limit as f64 / rate.value.max(1.0);
    if seconds <= STALL_SECONDS {
        return Outcome::Fine;
    }
    let want = (rate.value * 2.0) as u64;
    let want = (want / (1 << 20)).max(4) << 20;
    Finding::new("vm.dirty-stall", if seconds > 30.0 { Severity::Critical } else { Severity::Warning }, format!(
            "the dirty limit holds {:.0} s of writes for this device: expect multi-second stalls",
            seconds
        ))
        .evidence(vec![limit_src, format!("measured write throughput {} ({})", human(rate.value, "B/s"), rate.source)])
        .why(format!(
            "Up to {} can be dirty before writers are throttled, and the device drains {} per second; \
             a sync, umount, fsync or the throttle itself then blocks for up to {:.0} s (the slow-USB stall).",
            format_size(limit),
            human(rate.value, "B/s"),
            seconds
        ))
        .fix(
            format!(
            "sysctl -w vm.dirty_bytes={want} vm.dirty_background_bytes={}   (about 2 s of device writes; \
             persist in /etc/sysctl.d/)",
            want / 2
        ),
            "Smaller limits throttle bursty writers sooner; fast devices on the same machine share these \
               global limits (per-device limits need bdi max_ratio).",
        )
        .verify(format!(
            "tunelab tune vm.dirty_bytes --values {},{want} --experiment io.cache --target {}",
            limit,
            target(ev)
        ))
        .into()
}

fn dirty_limit_too_small(ev: &Evidence, _: Workload) -> Outcome {
    let Some((run, peak, point)) = ev.throttled.first() else {
        return Outcome::Fine;
    };
    Finding::new("vm.dirty-throttled", Severity::Info, format!("writers reached the dirty throttle point during run {run}"))
        .evidence(ev
            .throttled
            .iter()
            .take(3)
            .map(|(r, p, t)| format!("run {r}: Dirty+Writeback peaked at {} vs throttle point {}", format_size(*p), format_size(*t)))
            .collect())
        .why(format!(
            "Above (dirty_ratio + dirty_background_ratio)/2 the kernel slows writers down; a workload that \
             needs {} of cache must keep below that or be throttled.",
            format_size(*peak)
        ))
        .fix(
            format!(
            "raise the limits so that (dirty_bytes + dirty_background_bytes)/2 > {}: e.g. sysctl -w \
             vm.dirty_bytes={} vm.dirty_background_bytes={}",
            format_size(*peak),
            peak * 3 / 2,
            peak * 3 / 4
        ),
            "Larger limits lengthen the data-loss window on power cut and the stall when a slow device \
               finally has to drain them (see vm.dirty-stall).",
        )
        .verify(format!("tunelab monitor dirty during the workload, or tunelab tune vm.dirty_bytes (threshold {})", format_size(*point)))
        .into()
}

fn read_ahead(ev: &Evidence, w: Workload) -> Outcome {
    let Some(ra) = ev.facts.get_u64("block.read_ahead_kb") else {
        return Outcome::Fine;
    };
    if ra >= 128 || on_loop_device(ev) {
        return Outcome::Fine;
    }
    let disk = ev.facts.get("block.disk").unwrap_or("DISK");
    Finding::new("block.read-ahead", if w == Workload::Media || w == Workload::Throughput { Severity::Warning } else { Severity::Info }, format!("read_ahead_kb is {ra} on {disk}: small for sequential streams"))
        .evidence(vec![fact(ev, "block.read_ahead_kb")])
        .why("Sequential readers (media playback, copies) issue many small device reads when read-ahead \
              is small, adding per-request latency.")
        .fix(
            format!("echo 512 > /sys/block/{disk}/queue/read_ahead_kb   (or blockdev --setra 1024 /dev/{disk})"),
            "Random-read workloads waste bandwidth and cache on pages they never use.",
        )
        .verify(format!("tunelab tune read_ahead_kb --values {ra},128,512,2048 --experiment io.device-read --target {}", target(ev)))
        .into()
}

fn scheduler(ev: &Evidence, _: Workload) -> Outcome {
    let (Some(sched), Some(rot)) = (
        ev.facts.get("block.scheduler"),
        ev.facts.get_u64("block.rotational"),
    ) else {
        return Outcome::Fine;
    };
    if on_loop_device(ev) {
        return Outcome::Fine;
    }
    let disk = ev.facts.get("block.disk").unwrap_or("DISK");
    let (better, why) = match (rot, sched) {
        (1, "none") => (
            "mq-deadline",
            "A rotating disk with no I/O scheduler serves requests in arrival order: seeks multiply and \
             reads starve behind writes.",
        ),
        (0, "bfq") if !disk.starts_with("mmc") => (
            "none",
            "bfq spends CPU per request to be fair; on a fast non-rotating device that overhead caps IOPS.",
        ),
        _ => return Outcome::Fine,
    };
    Finding::new(
        "block.scheduler",
        Severity::Info,
        format!("{disk} (rotational={rot}) uses the {sched} scheduler"),
    )
    .evidence(vec![
        fact(ev, "block.scheduler"),
        fact(ev, "block.rotational"),
    ])
    .why(why)
    .fix(
        format!("echo {better} > /sys/block/{disk}/queue/scheduler"),
        "Scheduler choice trades fairness and latency against throughput; measure your workload.",
    )
    .verify(format!(
        "tunelab tune scheduler --values {sched},{better} --experiment io.record-size --target {}",
        target(ev)
    ))
    .into()
}

fn governor(ev: &Evidence, w: Workload) -> Outcome {
    let Some(g) = ev.facts.get("cpu.governor") else {
        return Outcome::Fine;
    };
    if !g.split(',').any(|x| x == "powersave") || !matches!(w, Workload::Latency | Workload::Media)
    {
        return Outcome::Fine;
    }
    Finding::new("cpu.governor", Severity::Warning, "the powersave governor on a latency-sensitive workload")
        .evidence(vec![fact(ev, "cpu.governor")])
        .why("powersave keeps the CPU at its lowest frequency (with acpi-cpufreq) or biases intel_pstate \
              towards efficiency, lengthening start-up times and frame deadlines.")
        .fix(
            "for g in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo schedutil > $g; done",
            "Higher power draw and temperature.",
        )
        .verify("tunelab tune governor --values powersave,schedutil,performance --experiment sched.messaging")
        .into()
}

fn median_of(r: &crate::model::run::PointResult, metric: &str) -> Option<f64> {
    r.metric(metric).map(|m| m.summary.median)
}

fn stdio_buffer(ev: &Evidence, _: Workload) -> Outcome {
    if ev.api.is_empty() {
        return Outcome::Fine;
    }
    // Compare, at the largest record measured, default stdio with the best alternative.
    let record = |r: &crate::model::run::PointResult| {
        r.params
            .get("record")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.0)
    };
    let api = |r: &crate::model::run::PointResult| {
        r.params
            .get("api")
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    let max_rec = ev.api.iter().map(record).fold(0.0, f64::max);
    let at: Vec<_> = ev.api.iter().filter(|r| record(r) == max_rec).collect();
    let stdio = at
        .iter()
        .find(|r| api(r) == "stdio")
        .and_then(|r| median_of(r, io_api::METRIC_WRITE_THROUGHPUT));
    let best = at
        .iter()
        .filter(|r| api(r) != "stdio")
        .filter_map(|r| Some((api(r), median_of(r, io_api::METRIC_WRITE_THROUGHPUT)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let (Some(stdio), Some((best_api, best))) = (stdio, best) else {
        return Outcome::Fine;
    };
    if stdio >= 0.8 * best {
        return Outcome::Fine;
    }
    Finding::new("app.stdio-buffer", Severity::Info, format!(
            "stdio with its default buffer writes {:.0}% slower than {best_api} at {}-byte records",
            (1.0 - stdio / best) * 100.0,
            max_rec
        ))
        .evidence(vec![format!(
            "io.api record={max_rec}: stdio {} vs {best_api} {}",
            human(stdio, "B/s"),
            human(best, "B/s")
        )])
        .why("The default stdio buffer (st_blksize, usually 4 KiB) splits large records into many small \
              write() calls and copies every byte twice.")
        .fix(
            "in the application: setvbuf(fp, NULL, _IOFBF, 64 * 1024) after fopen(), or write large records with write()",
            "More memory per open FILE.",
        )
        .verify(format!("tunelab run io.api --target {}", target(ev)))
        .into()
}

fn pregrow(ev: &Evidence, _: Workload) -> Outcome {
    let method = |r: &&crate::model::run::PointResult| {
        r.params
            .get("method")
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    let total = |m: &str| {
        ev.pregrow
            .iter()
            .find(|r| method(r) == m)
            .and_then(|r| median_of(r, pregrow::METRIC_TOTAL_TIME))
    };
    let (Some(extend), Some(falloc)) = (total("extend"), total("fallocate")) else {
        return Outcome::Fine;
    };
    if falloc >= 0.9 * extend {
        return Outcome::Fine;
    }
    Finding::new("app.pregrow", Severity::Info, format!("pre-allocating with fallocate() makes file creation {:.0}% faster here", (1.0 - falloc / extend) * 100.0))
        .evidence(vec![format!(
            "io.pregrow total time (creation + write, fsync included): extend {} vs fallocate {}",
            human(extend, "s"),
            human(falloc, "s")
        )])
        .why("Allocating the final size up front lets the filesystem pick contiguous extents and avoids \
              allocation work on every extending write. (ftruncate only sets the size: the file stays sparse.)")
        .fix(
            "in the application: posix_fallocate(fd, 0, final_size) before writing",
            "Space is reserved even if the file ends up smaller.",
        )
        .verify(format!("tunelab run io.pregrow --target {}", target(ev)))
        .into()
}

mod cpu;
mod diagnose;
mod flash;
mod latency;
mod random_io;

#[cfg(test)]
mod tests;
