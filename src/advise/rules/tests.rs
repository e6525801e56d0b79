use super::super::evidence::Measured;
use super::super::{advise, Evidence, Severity, Workload};
use crate::system::inspect::Facts;

/// A healthy ext4 on an SSD-like disk with sane limits.
fn healthy() -> Vec<(&'static str, &'static str)> {
    vec![
        ("fs.path", "/data"),
        ("fs.mount_point", "/data"),
        ("fs.type", "ext4"),
        ("fs.options", "rw,relatime"),
        ("fs.sync", "async"),
        ("fs.atime", "relatime"),
        ("block.disk", "sda"),
        ("block.rotational", "0"),
        ("block.scheduler", "mq-deadline"),
        ("block.read_ahead_kb", "128"),
        ("vm.dirty_ratio", "20"),
        ("vm.dirty_background_ratio", "10"),
        ("vm.dirty_bytes", "0"),
        ("vm.nr_dirty_threshold_bytes", "209715200"),
        ("mem.available_bytes", "1048576000"),
        ("cpu.governor", "schedutil"),
    ]
}

fn with(overrides: &[(&'static str, &'static str)]) -> Evidence {
    let mut pairs = healthy();
    for (k, v) in overrides {
        pairs.retain(|(pk, _)| pk != k);
        pairs.push((k, v));
    }
    Evidence {
        facts: Facts::from_pairs(&pairs),
        // 200 MiB/s: the 200 MiB limit is one second of writes.
        write_throughput: Some(Measured {
            value: 200.0 * 1048576.0,
            source: "test".into(),
        }),
        ..Default::default()
    }
}

fn ids(ev: &Evidence, w: Workload) -> Vec<&'static str> {
    advise(ev, w).findings.iter().map(|f| f.id).collect()
}

#[test]
fn a_healthy_configuration_raises_no_alarm() {
    for w in [
        Workload::General,
        Workload::Latency,
        Workload::Media,
        Workload::Throughput,
    ] {
        let a = advise(&with(&[]), w);
        assert!(
            a.findings.is_empty(),
            "{w:?}: {:?}",
            a.findings.iter().map(|f| f.id).collect::<Vec<_>>()
        );
    }
}

#[test]
fn sync_and_strictatime_mounts_are_found() {
    let ev = with(&[("fs.sync", "sync"), ("fs.options", "rw,sync")]);
    assert_eq!(ids(&ev, Workload::General), ["mount.sync"]);
    let f = &advise(&ev, Workload::General).findings[0];
    assert!(f.command.contains("remount,async /data"));
    assert!(!f.risk.is_empty() && !f.verify.is_empty() && !f.evidence.is_empty());
    let ev = with(&[("fs.atime", "strictatime")]);
    assert_eq!(ids(&ev, Workload::General), ["mount.strictatime"]);
}

#[test]
fn a_dirty_limit_far_above_the_device_rate_is_a_stall() {
    let mut ev = with(&[]);
    // 4 MiB/s device (USB 2 stick class) vs 200 MiB limit: 50 s of writes.
    ev.write_throughput = Some(Measured {
        value: 4.0 * 1048576.0,
        source: "run x".into(),
    });
    let a = advise(&ev, Workload::General);
    assert_eq!(a.findings.len(), 1);
    let f = &a.findings[0];
    assert_eq!(f.id, "vm.dirty-stall");
    assert_eq!(f.severity, Severity::Critical);
    assert!(f.title.contains("50 s"), "{}", f.title);
    assert!(
        f.command.contains("vm.dirty_bytes=8388608"),
        "{}",
        f.command
    );
}

#[test]
fn without_a_measurement_the_stall_rule_says_what_is_missing() {
    let mut ev = with(&[]);
    ev.write_throughput = None;
    let a = advise(&ev, Workload::General);
    assert!(a.findings.is_empty());
    assert!(
        a.gaps.iter().any(|g| g.contains("io.record-size")),
        "{:?}",
        a.gaps
    );
}

#[test]
fn usb_rules() {
    let ev = with(&[
        ("usb.version", " 3.20"),
        ("usb.speed_mbps", "480"),
        ("usb.driver", "usb-storage"),
    ]);
    let got = ids(&ev, Workload::General);
    assert!(
        got.contains(&"usb.link-speed") && got.contains(&"usb.uas"),
        "{got:?}"
    );
    let ev = with(&[
        ("usb.version", " 2.00"),
        ("usb.speed_mbps", "480"),
        ("usb.driver", "usb-storage"),
    ]);
    assert!(
        ids(&ev, Workload::General).is_empty(),
        "a USB 2 device at 480 is fine"
    );
}

#[test]
fn usb3_storage_anywhere_on_a_usb2_link_is_found() {
    let ev = with(&[
        (
            "usb.2-1.storage",
            "Ultra USB 3.0: USB 3.20, link 480 Mb/s, driver usb-storage",
        ),
        ("usb.2-1.version", "3.20"),
        ("usb.2-1.speed_mbps", "480"),
        (
            "usb.4-1.storage",
            "T7: USB 3.10, link 5000 Mb/s, driver uas",
        ),
        ("usb.4-1.version", "3.10"),
        ("usb.4-1.speed_mbps", "5000"),
    ]);
    let a = advise(&ev, Workload::General);
    let f = a
        .findings
        .iter()
        .find(|f| f.id == "usb.storage-link-speed")
        .expect("a finding for 2-1");
    assert!(
        f.title.contains("2-1") && !f.title.contains("4-1"),
        "{}",
        f.title
    );
    // A USB 2 stick at 480 and a USB 3 disk at 5000 are fine.
    let ev = with(&[
        ("usb.1-1.version", "2.00"),
        ("usb.1-1.speed_mbps", "480"),
        ("usb.4-1.version", "3.10"),
        ("usb.4-1.speed_mbps", "5000"),
    ]);
    assert!(ids(&ev, Workload::General).is_empty());
}

#[test]
fn workload_dependent_rules() {
    let ev = with(&[("cpu.governor", "powersave")]);
    assert!(ids(&ev, Workload::General).is_empty());
    assert_eq!(ids(&ev, Workload::Latency), ["cpu.governor"]);
    let ev = with(&[("block.read_ahead_kb", "16")]);
    let a = advise(&ev, Workload::Media);
    assert_eq!(a.findings[0].id, "block.read-ahead");
    assert_eq!(a.findings[0].severity, Severity::Warning);
    let ev = with(&[("block.rotational", "1"), ("block.scheduler", "none")]);
    assert_eq!(ids(&ev, Workload::General), ["block.scheduler"]);
}
