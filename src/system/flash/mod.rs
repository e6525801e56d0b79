//! Flash identity and wear from sysfs: the CID/CSD fields an MMC or SD card
//! exposes under /sys/block/<disk>/device (manufacturer, name, date, the
//! erase size the card prefers), eMMC 5.0 health (`life_time`,
//! `pre_eol_info`), and what an NVMe controller shows. `root` is "/" on a
//! machine, a fixture tree in tests. Read-only. `wa` counts the write
//! amplification of a storage point for the runner.

pub(crate) mod wa;

use std::fs;
use std::path::{Path, PathBuf};

/// One fact: key, value, the file it came from.
pub(crate) type FlashFact = (String, String, String);

/// What a device says about its flash, or one "not reported" fact.
pub(crate) fn facts(root: &Path, disk: &str) -> Vec<FlashFact> {
    let dev = root.join("sys/block").join(disk).join("device");
    let mut out = Vec::new();
    let read = |name: &str| -> Option<(String, PathBuf)> {
        let p = dev.join(name);
        let v = fs::read_to_string(&p).ok()?.trim().to_string();
        (!v.is_empty()).then_some((v, p))
    };
    let mut put = |key: &str, value: String, src: &Path| {
        out.push((format!("flash.{key}"), value, src.display().to_string()));
    };
    let kind = read("type");
    if let Some((kind, src)) = &kind {
        // MMC or SD (the mmc bus says which).
        put("type", kind.clone(), src);
        if let Some((id, src)) = read("manfid") {
            let name = manufacturer(kind, &id);
            put("manufacturer", format!("{id} ({name})"), &src);
        }
        for key in ["name", "date", "serial", "fwrev", "hwrev"] {
            if let Some((v, src)) = read(key) {
                put(key, v, &src);
            }
        }
        if let Some((v, src)) = read("preferred_erase_size") {
            put("preferred_erase_size", v, &src);
        }
        if let Some((csd, src)) = read("csd") {
            if let Some(rate) = csd_transfer_rate(kind, &csd) {
                put("max_transfer", rate, &src);
            }
        }
        match read("life_time") {
            Some((v, src)) => put("life_time", life_time(&v), &src),
            None => put("life_time", "not reported".into(), &dev.join("life_time")),
        }
        if let Some((v, src)) = read("pre_eol_info") {
            put("pre_eol", pre_eol(&v), &src);
        }
    } else if disk.starts_with("nvme") {
        let ctrl = root.join("sys/block").join(disk).join("device");
        for key in ["model", "serial", "firmware_rev"] {
            if let Ok(v) = fs::read_to_string(ctrl.join(key)) {
                put(key, v.trim().to_string(), &ctrl.join(key));
            }
        }
        put(
            "percentage_used",
            "not reported (sysfs has no SMART log; 'nvme smart-log' reads it as root)".into(),
            &ctrl,
        );
    } else {
        put(
            "wear",
            "not reported (no MMC/SD/NVMe identity in sysfs for this device)".into(),
            &dev,
        );
    }
    out
}

/// The facts that change as a device wears (what a study may cost).
const WEAR_KEYS: &[&str] = &[
    "flash.life_time",
    "flash.pre_eol",
    "flash.percentage_used",
    "flash.wear",
];

/// The wear figures `disk` reports (or its "not reported" fact): key, value.
pub(crate) fn wear(root: &Path, disk: &str) -> Vec<(String, String)> {
    facts(root, disk)
        .into_iter()
        .filter(|(k, _, _)| WEAR_KEYS.contains(&k.as_str()))
        .map(|(k, v, _)| (k, v))
        .collect()
}

/// What a study cost in wear, as environment entries `study.wear.<figure>`:
/// the figure before and after, or "not reported". eMMC reports life in
/// 10% steps, so "unchanged" means less than a step (the note says so).
pub(crate) fn wear_cost(
    before: &[(String, String)],
    after: &[(String, String)],
) -> Vec<(String, String)> {
    let reported = |v: &str| !v.starts_with("not reported");
    let mut out = Vec::new();
    for (key, was) in before {
        let name = key.trim_start_matches("flash.");
        let now = after
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str());
        let value = match now {
            Some(now) if reported(was) && reported(now) && now == was => {
                format!("{was} before and after: no step (the device counts in steps of its own, 10% of life for eMMC)")
            }
            Some(now) if reported(was) && reported(now) => format!("{was} before, {now} after"),
            _ if !reported(was) => format!("not reported ({was})"),
            _ => format!("{was} before; not reported after"),
        };
        out.push((format!("study.wear.{name}"), value));
    }
    if out.is_empty() {
        out.push(("study.wear".into(), "not reported (no target disk)".into()));
    }
    out
}

/// `inspect`'s flash section for the target's disk.
pub(crate) fn inspect(f: &mut super::facts::Facts, root: &Path, disk: &str) {
    for (key, value, source) in facts(root, disk) {
        f.add("flash", &key, value, source);
    }
}

/// The partitions of `disk` and their starts in bytes, in name order.
pub(crate) fn partitions(root: &Path, disk: &str) -> Vec<(String, u64)> {
    let dir = root.join("sys/class/block").join(disk);
    let mut out: Vec<(String, u64)> = fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let start = fs::read_to_string(e.path().join("start")).ok()?;
            let sectors: u64 = start.trim().parse().ok()?;
            name.starts_with(disk).then_some((name, sectors * 512))
        })
        .collect();
    out.sort();
    out
}

/// JEDEC/SD manufacturer ids seen on boards; others print as the id only.
fn manufacturer(kind: &str, id: &str) -> &'static str {
    let n = u32::from_str_radix(id.trim_start_matches("0x"), 16).unwrap_or(u32::MAX);
    match (kind, n) {
        ("MMC", 0x15) => "Samsung",
        ("MMC", 0x13) | ("MMC", 0xfe) => "Micron",
        ("MMC", 0x45) => "SanDisk",
        ("MMC", 0x90) => "SK Hynix",
        ("MMC", 0x11) => "Toshiba/Kioxia",
        ("MMC", 0x70) => "Kingston",
        ("SD", 0x03) => "SanDisk",
        ("SD", 0x02) => "Toshiba/Kioxia",
        ("SD", 0x1b) => "Samsung",
        ("SD", 0x27) => "Phison",
        ("SD", 0x74) => "Transcend",
        ("SD", 0x9f) => "Kingston",
        _ => "unknown maker",
    }
}

/// eMMC DEVICE_LIFE_TIME_EST_TYP_A/B: steps of 10% of the life used.
fn life_time(v: &str) -> String {
    let part = |s: &str, area: &str| {
        let n = u8::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or(0);
        match n {
            1..=10 => format!("{area} {}-{}% used", (n - 1) * 10, n * 10),
            11 => format!("{area} beyond its estimated life"),
            _ => format!("{area} not defined"),
        }
    };
    let mut it = v.split_whitespace();
    match (it.next(), it.next()) {
        (Some(a), Some(b)) => format!(
            "{} ({}, {})",
            v,
            part(a, "type A (SLC)"),
            part(b, "type B (MLC)")
        ),
        _ => v.to_string(),
    }
}

/// eMMC PRE_EOL_INFO: how much of the reserved blocks is consumed.
fn pre_eol(v: &str) -> String {
    let n = u8::from_str_radix(v.trim_start_matches("0x"), 16).unwrap_or(0);
    let what = match n {
        1 => "normal (under 80% of reserved blocks consumed)",
        2 => "warning (80% of reserved blocks consumed)",
        3 => "urgent (90% of reserved blocks consumed)",
        _ => "not defined",
    };
    format!("{v} ({what})")
}

/// The CSD's TRAN_SPEED (bits 103..96): the bus rate the card allows at
/// power-up (an eMMC's high-speed modes are in its EXT_CSD, not here).
fn csd_transfer_rate(kind: &str, csd: &str) -> Option<String> {
    let byte = u8::from_str_radix(csd.get(6..8)?, 16).ok()?;
    let unit = [100e3, 1e6, 10e6, 100e6].get(usize::from(byte & 7))?;
    let sd = [
        0.0, 1.0, 1.2, 1.3, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 7.0, 8.0,
    ];
    let mmc = [
        0.0, 1.0, 1.2, 1.3, 1.5, 2.0, 2.6, 3.0, 3.5, 4.0, 4.5, 5.2, 5.5, 6.0, 7.0, 8.0,
    ];
    let table = if kind == "MMC" { mmc } else { sd };
    let mult = table[usize::from((byte >> 3) & 15)];
    (mult > 0.0).then(|| {
        format!(
            "{} Mbit/s per data line (CSD TRAN_SPEED)",
            unit * mult / 1e6
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/flash")
            .join(name)
    }

    fn value<'a>(f: &'a [FlashFact], key: &str) -> &'a str {
        f.iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, v, _)| v.as_str())
            .unwrap_or_else(|| panic!("{key} missing in {f:?}"))
    }

    #[test]
    fn an_emmc_reports_identity_and_life_time() {
        let f = facts(&fixture("emmc"), "mmcblk0");
        assert_eq!(value(&f, "flash.type"), "MMC");
        assert_eq!(value(&f, "flash.manufacturer"), "0x000015 (Samsung)");
        assert_eq!(value(&f, "flash.name"), "8GTF4R");
        assert_eq!(value(&f, "flash.date"), "06/2019");
        assert_eq!(
            value(&f, "flash.life_time"),
            "0x02 0x01 (type A (SLC) 10-20% used, type B (MLC) 0-10% used)"
        );
        assert!(value(&f, "flash.pre_eol").starts_with("0x01 (normal"));
        assert_eq!(
            value(&f, "flash.max_transfer"),
            "26 Mbit/s per data line (CSD TRAN_SPEED)"
        );
    }

    #[test]
    fn inspect_shows_the_fixture_emmc_in_its_flash_section() {
        let mut f = super::super::facts::Facts::default();
        inspect(&mut f, &fixture("emmc"), "mmcblk0");
        let life = f.0.iter().find(|x| x.key == "flash.life_time").unwrap();
        assert_eq!(life.section, "flash");
        assert!(life.source.ends_with("sys/block/mmcblk0/device/life_time"));
        assert!(f
            .0
            .iter()
            .any(|x| x.key == "flash.name" && x.value == "8GTF4R"));
    }

    #[test]
    fn the_wear_a_study_cost_is_read_before_and_after() {
        let before = wear(&fixture("emmc"), "mmcblk0");
        let after = wear(&fixture("emmc-after"), "mmcblk0");
        let cost = wear_cost(&before, &after);
        let get = |k: &str| {
            cost.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        let life = get("study.wear.life_time").unwrap();
        assert!(
            life.contains("0x02 0x01") && life.contains("before") && life.contains("0x03 0x01"),
            "{life}"
        );
        assert!(
            life.contains("10-20% used after") || life.contains("20-30% used"),
            "{life}"
        );
        let eol = get("study.wear.pre_eol").unwrap();
        assert!(eol.contains("no step"), "{eol}");
        // A device without wear figures says so, before and after.
        let plain = wear(&fixture("sd"), "sda");
        let cost = wear_cost(&plain, &plain);
        assert!(
            cost.iter().all(|(_, v)| v.starts_with("not reported")),
            "{cost:?}"
        );
    }

    #[test]
    fn an_sd_card_has_no_life_time_and_a_plain_disk_no_wear() {
        let f = facts(&fixture("sd"), "mmcblk1");
        assert_eq!(value(&f, "flash.type"), "SD");
        assert_eq!(value(&f, "flash.manufacturer"), "0x000003 (SanDisk)");
        assert_eq!(value(&f, "flash.life_time"), "not reported");
        assert_eq!(
            value(&f, "flash.max_transfer"),
            "25 Mbit/s per data line (CSD TRAN_SPEED)"
        );
        let f = facts(&fixture("sd"), "sda");
        assert!(value(&f, "flash.wear").starts_with("not reported"));
    }
}
