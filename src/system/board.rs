//! Board facts for `inspect`: what an embedded developer checks first —
//! the device-tree model, the CPU cores and their big.LITTLE clusters, the
//! thermal zones, the eMMC/SD card and the link speed of USB storage. Every
//! path is read below `root` ("/" normally, a fixture tree in tests), laid
//! out as the kernel documents it (Documentation/ABI, mmc/mmc-dev-attrs,
//! thermal/sysfs-api, cpu-freq/cpufreq-stats). Missing files: no fact.

use std::fs;
use std::path::Path;

use super::facts::Facts;
use super::proc;
use super::sysfs::{cpu_list, sorted_entries};

/// Add every board fact readable under `root`.
pub(crate) fn collect(root: &Path, f: &mut Facts) {
    device_tree(root, f);
    cores(root, f);
    clusters(root, f);
    thermal(root, f);
    mmc(root, f);
    usb_storage(root, f);
}

fn read(root: &Path, rel: &str) -> Option<String> {
    read_path(&root.join(rel))
}

/// A file's text without surrounding blanks and NULs; None when unreadable
/// or empty.
fn read_path(path: &Path) -> Option<String> {
    let b = fs::read(path).ok()?;
    let s = String::from_utf8_lossy(&b)
        .trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .to_string();
    (!s.is_empty()).then_some(s)
}

/// The names in `dir`, sorted (none when it cannot be read).
fn sorted_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `/proc/device-tree` is a link to `/sys/firmware/devicetree/base`; either may exist.
fn device_tree(root: &Path, f: &mut Facts) {
    const SYS_BASE: &str = "sys/firmware/devicetree/base";
    let bases = [
        (
            proc::Root::under(root).file("device-tree"),
            proc::name("device-tree"),
        ),
        (root.join(SYS_BASE), format!("/{SYS_BASE}")),
    ];
    for (dir, base) in bases {
        let Some(model) = read_path(&dir.join("model")) else {
            continue;
        };
        f.add("board", "board.model", model, format!("{base}/model"));
        if let Some(c) = read_path(&dir.join("compatible")) {
            // NUL-separated, most specific first.
            let list: Vec<&str> = c.split('\0').filter(|s| !s.is_empty()).collect();
            f.add(
                "board",
                "board.compatible",
                list.join(", "),
                format!("{base}/compatible"),
            );
        }
        return;
    }
}

/// Name an ARM core from /proc/cpuinfo's implementer and part (the MIDR fields).
pub(crate) fn core_name(implementer: u32, part: u32) -> String {
    let vendor = match implementer {
        0x41 => "ARM",
        0x42 => "Broadcom",
        0x43 => "Cavium",
        0x48 => "HiSilicon",
        0x4e => "NVIDIA",
        0x51 => "Qualcomm",
        0x53 => "Samsung",
        0x56 => "Marvell",
        0x61 => "Apple",
        0x69 => "Intel",
        0xc0 => "Ampere",
        _ => return format!("implementer 0x{implementer:02x} part 0x{part:03x}"),
    };
    let core = if implementer == 0x41 {
        match part {
            0xb76 => "ARM1176",
            0xc05 => "Cortex-A5",
            0xc07 => "Cortex-A7",
            0xc08 => "Cortex-A8",
            0xc09 => "Cortex-A9",
            0xc0d | 0xc0e => "Cortex-A17",
            0xc0f => "Cortex-A15",
            0xd01 => "Cortex-A32",
            0xd03 => "Cortex-A53",
            0xd04 => "Cortex-A35",
            0xd05 => "Cortex-A55",
            0xd07 => "Cortex-A57",
            0xd08 => "Cortex-A72",
            0xd09 => "Cortex-A73",
            0xd0a => "Cortex-A75",
            0xd0b => "Cortex-A76",
            0xd0c => "Neoverse-N1",
            0xd0d => "Cortex-A77",
            0xd40 => "Neoverse-V1",
            0xd41 => "Cortex-A78",
            0xd44 => "Cortex-X1",
            0xd46 => "Cortex-A510",
            0xd47 => "Cortex-A710",
            0xd48 => "Cortex-X2",
            0xd49 => "Neoverse-N2",
            0xd4d => "Cortex-A715",
            _ => "",
        }
    } else {
        ""
    };
    if core.is_empty() {
        format!("{vendor} part 0x{part:03x}")
    } else {
        format!("{vendor} {core}")
    }
}

fn hex(v: &str) -> Option<u32> {
    let v = v.trim();
    u32::from_str_radix(v.trim_start_matches("0x"), 16).ok()
}

/// Per core: implementer/part/revision from /proc/cpuinfo (ARM has no
/// "model name"). Returns core number -> name, for the clusters.
pub(crate) fn core_names(root: &Path) -> Vec<(usize, String, String)> {
    let Some(info) = read_path(&proc::Root::under(root).file("cpuinfo")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for block in info.split("\n\n") {
        let field = |name: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        let (Some(cpu), Some(imp), Some(part)) = (
            field("processor").and_then(|p| p.parse::<usize>().ok()),
            field("CPU implementer").and_then(|v| hex(&v)),
            field("CPU part").and_then(|v| hex(&v)),
        ) else {
            continue;
        };
        let variant = field("CPU variant").and_then(|v| hex(&v));
        let revision = field("CPU revision").and_then(|v| v.parse::<u32>().ok());
        let rev = match (variant, revision) {
            (Some(v), Some(r)) => format!(", r{v}p{r}"),
            _ => String::new(),
        };
        out.push((
            cpu,
            core_name(imp, part),
            format!("implementer 0x{imp:02x}, part 0x{part:03x}{rev}"),
        ));
    }
    out
}

fn cores(root: &Path, f: &mut Facts) {
    let cores = core_names(root);
    for (cpu, name, ids) in &cores {
        f.add(
            "board",
            &format!("cpu{cpu}.core"),
            format!("{name} ({ids})"),
            proc::proc_path!("cpuinfo"),
        );
    }
}

/// One cpufreq policy per cluster: its CPUs (related_cpus), max frequency
/// and the core type its CPUs report.
fn clusters(root: &Path, f: &mut Facts) {
    let policies = sorted_entries(&root.join("sys/devices/system/cpu/cpufreq"), "policy");
    let names = core_names(root);
    for policy in policies {
        let rel = format!("sys/devices/system/cpu/cpufreq/{policy}");
        let Some(cpus) = read(root, &format!("{rel}/related_cpus")) else {
            continue;
        };
        let max =
            read(root, &format!("{rel}/cpuinfo_max_freq")).and_then(|v| v.parse::<u64>().ok());
        let list = cpu_list(&cpus);
        let mut kinds: Vec<&str> = list
            .iter()
            .filter_map(|c| {
                names
                    .iter()
                    .find(|(n, _, _)| n == c)
                    .map(|(_, k, _)| k.as_str())
            })
            .collect();
        kinds.dedup();
        let mut v = format!("CPUs {cpus} ({} cores)", list.len());
        if let Some(khz) = max {
            v.push_str(&format!(", max {} MHz", khz / 1000));
        }
        if !kinds.is_empty() {
            v.push_str(&format!(", {}", kinds.join("/")));
        }
        f.add(
            "board",
            &format!("cpu.cluster.{policy}"),
            v,
            format!("/{rel}/related_cpus, cpuinfo_max_freq"),
        );
    }
}

fn celsius(milli: &str) -> Option<String> {
    let v: f64 = milli.trim().parse().ok()?;
    Some(format!("{:.1} °C", v / 1000.0))
}

/// Thermal zones: type, current temperature and trip points.
fn thermal(root: &Path, f: &mut Facts) {
    for zone in sorted_entries(&root.join("sys/class/thermal"), "thermal_zone") {
        let rel = format!("sys/class/thermal/{zone}");
        let kind = read(root, &format!("{rel}/type")).unwrap_or_else(|| "?".into());
        let temp = read(root, &format!("{rel}/temp"))
            .and_then(|t| celsius(&t))
            .unwrap_or_else(|| "temperature unreadable".into());
        let mut trips = Vec::new();
        for i in 0.. {
            let Some(t) = read(root, &format!("{rel}/trip_point_{i}_temp")) else {
                break;
            };
            let ty = read(root, &format!("{rel}/trip_point_{i}_type")).unwrap_or_default();
            trips.push(format!("{ty} {}", celsius(&t).unwrap_or(t)));
        }
        let trips = if trips.is_empty() {
            "no trip points".to_string()
        } else {
            format!("trips: {}", trips.join(", "))
        };
        f.add(
            "board",
            &format!("thermal.{zone}"),
            format!("{kind}: {temp}; {trips}"),
            format!("/{rel}/{{type,temp,trip_point_*}}"),
        );
    }
}

/// Manufacturer names by the CID manfid; SD (SD Association) and eMMC
/// (JEDEC) assign them separately. Unknown ids are shown as numbers.
fn mmc_vendor(kind: &str, manfid: u32) -> Option<&'static str> {
    if kind == "SD" {
        Some(match manfid {
            0x01 => "Panasonic",
            0x02 => "Toshiba/Kioxia",
            0x03 => "SanDisk",
            0x1b => "Samsung",
            0x1d => "ADATA",
            0x27 => "Phison",
            0x28 => "Lexar",
            0x31 => "Silicon Power",
            0x41 => "Kingston",
            0x74 => "Transcend",
            0x76 => "Patriot",
            0x82 => "Sony",
            _ => return None,
        })
    } else {
        Some(match manfid {
            0x11 => "Toshiba/Kioxia",
            0x13 => "Micron",
            0x15 => "Samsung",
            0x45 => "SanDisk",
            0x70 => "Kingston",
            0x88 => "Foresee",
            0x90 => "SK hynix",
            0x9b => "YMTC",
            0xd6 => "Longsys",
            0xfe => "Micron",
            _ => return None,
        })
    }
}

/// The bus mode from debugfs `ios` (root only, debugfs mounted): timing,
/// clock and width, e.g. "mmc HS200, 200 MHz, 8 bits".
fn mmc_ios(root: &Path, host: &str) -> Option<String> {
    let ios = read(root, &format!("sys/kernel/debug/{host}/ios"))?;
    let field = |name: &str| {
        ios.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    // "timing spec:  9 (mmc HS200)" -> "mmc HS200"
    let inner = |v: String| match (v.find('('), v.rfind(')')) {
        (Some(a), Some(b)) if a < b => v[a + 1..b].to_string(),
        _ => v,
    };
    let mut parts = Vec::new();
    parts.extend(field("timing spec").map(inner));
    if let Some(hz) = field("clock").and_then(|c| c.split_whitespace().next()?.parse::<u64>().ok())
    {
        parts.push(format!("{} MHz", hz / 1_000_000));
    }
    parts.extend(field("bus width").map(inner));
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// eMMC and SD cards: block device, type, name, manufacturer, bus mode.
fn mmc(root: &Path, f: &mut Facts) {
    for card in sorted_names(&root.join("sys/bus/mmc/devices")) {
        let rel = format!("sys/bus/mmc/devices/{card}");
        let kind = read(root, &format!("{rel}/type")).unwrap_or_else(|| "?".into());
        if kind == "SDIO" {
            continue; // Wi-Fi and the like, not storage
        }
        let block = fs::read_dir(root.join(&rel).join("block"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
            .unwrap_or_else(|| "no block device".into());
        let name = read(root, &format!("{rel}/name")).unwrap_or_else(|| "?".into());
        let maker = read(root, &format!("{rel}/manfid"))
            .and_then(|m| hex(&m))
            .map(|id| match mmc_vendor(&kind, id) {
                Some(v) => format!("{v} (manfid 0x{id:06x})"),
                None => format!("manfid 0x{id:06x}"),
            });
        let mut v = format!("{block}: {kind} \"{name}\"");
        if let Some(m) = maker {
            v.push_str(&format!(", {m}"));
        }
        if let Some(d) = read(root, &format!("{rel}/date")) {
            v.push_str(&format!(", made {d}"));
        }
        let host = card.split(':').next().unwrap_or(&card);
        let mut source = format!("/{rel}/{{type,name,manfid}}");
        match mmc_ios(root, host) {
            Some(ios) => {
                v.push_str(&format!(", bus {ios}"));
                source.push_str(&format!(", /sys/kernel/debug/{host}/ios"));
            }
            None => v.push_str(", bus mode not readable (needs root and debugfs)"),
        }
        f.add("board", &format!("mmc.{block}"), v, source);
    }
}

/// USB devices with a storage interface (usb-storage or uas driver, or
/// interface class 08): version, negotiated speed and driver.
fn usb_storage(root: &Path, f: &mut Facts) {
    let dir = root.join("sys/bus/usb/devices");
    let names = sorted_names(&dir);
    for dev in names
        .iter()
        .filter(|n| !n.contains(':') && !n.starts_with("usb"))
    {
        let storage = names
            .iter()
            .filter(|i| i.starts_with(&format!("{dev}:")))
            .find_map(|i| {
                let ipath = dir.join(i);
                let driver = fs::read_link(ipath.join("driver"))
                    .ok()
                    .and_then(|l| Some(l.file_name()?.to_string_lossy().into_owned()));
                let class = read(root, &format!("sys/bus/usb/devices/{i}/bInterfaceClass"));
                match driver.as_deref() {
                    Some(d @ ("usb-storage" | "uas")) => Some(d.to_string()),
                    _ if class.as_deref() == Some("08") => {
                        Some(driver.unwrap_or_else(|| "no driver bound".into()))
                    }
                    _ => None,
                }
            });
        let Some(driver) = storage else {
            continue;
        };
        let rel = format!("sys/bus/usb/devices/{dev}");
        let (Some(speed), Some(version)) = (
            read(root, &format!("{rel}/speed")),
            read(root, &format!("{rel}/version")),
        ) else {
            continue;
        };
        let product = read(root, &format!("{rel}/product")).unwrap_or_else(|| "?".into());
        let src = format!("/{rel}/{{speed,version}}");
        f.add(
            "board",
            &format!("usb.{dev}.storage"),
            format!("{product}: USB {version}, link {speed} Mb/s, driver {driver}"),
            src.clone(),
        );
        f.add("board", &format!("usb.{dev}.version"), version, src.clone());
        f.add("board", &format!("usb.{dev}.speed_mbps"), speed, src);
    }
}

/// USB storage devices that support USB 3 (version 3.x) but negotiated USB 2
/// speed (≤ 480 Mb/s): (bus id, version, speed).
pub(crate) fn slow_usb3_links(f: &Facts) -> Vec<(String, String, u64)> {
    f.0.iter()
        .filter_map(|fact| {
            let dev = fact.key.strip_prefix("usb.")?.strip_suffix(".version")?;
            let major: f64 = fact.value.trim().parse().ok()?;
            let speed = f.get_u64(&format!("usb.{dev}.speed_mbps"))?;
            (major >= 3.0 && speed <= 480).then(|| (dev.to_string(), fact.value.clone(), speed))
        })
        .collect()
}

#[cfg(test)]
mod tests;
