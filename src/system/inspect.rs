//! `inspect`: every configuration fact that decides I/O and system
//! performance, each with the file it came from. Read-only; a fact that
//! cannot be read is left out (or says why).

use std::fs;
use std::path::{Path, PathBuf};

use super::device::{active_choice, device_for_path, BlockDevice};
use super::mounts::mount_for_path;
use super::proc::{self, proc_path};

pub(crate) use super::facts::Facts;

/// Gather everything, for `target` (a directory) when given.
pub(crate) fn inspect(target: Option<&Path>) -> Facts {
    let mut f = Facts::default();
    if let Some(t) = target {
        filesystem(&mut f, t);
        if let Some(dev) = device_for_path(t) {
            block_chain(&mut f, &dev);
            super::flash::inspect(&mut f, Path::new("/"), &dev.disk);
        } else {
            f.add(
                "block",
                "device",
                "none (not backed by a block device)",
                "stat st_dev",
            );
        }
    }
    vm(&mut f);
    cpu(&mut f);
    super::cpu::opp_facts(Path::new("/"), &mut f);
    kernel(&mut f);
    super::board::collect(Path::new("/"), &mut f);
    f
}

fn filesystem(f: &mut Facts, target: &Path) {
    let Some(m) = mount_for_path(target) else {
        f.add(
            "filesystem",
            "mount",
            "unknown",
            proc_path!("self/mountinfo"),
        );
        return;
    };
    let src = proc_path!("self/mountinfo");
    f.add(
        "filesystem",
        "fs.path",
        target.display().to_string(),
        "--target",
    );
    f.add("filesystem", "fs.type", m.fs_type.clone(), src);
    f.add(
        "filesystem",
        "fs.mount_point",
        m.mount_point.display().to_string(),
        src,
    );
    f.add("filesystem", "fs.source", m.source.clone(), src);
    f.add("filesystem", "fs.options", m.options.join(","), src);
    let has = |o: &str| m.options.iter().any(|x| x == o);
    f.add(
        "filesystem",
        "fs.sync",
        if has("sync") { "sync" } else { "async" },
        src,
    );
    f.add("filesystem", "fs.atime", atime_mode(&m.options), src);
    if let Some(d) = m.options.iter().find_map(|o| o.strip_prefix("data=")) {
        f.add("filesystem", "fs.data_mode", d, src);
    } else if m.fs_type == "ext4" || m.fs_type == "ext3" {
        f.add(
            "filesystem",
            "fs.data_mode",
            "ordered",
            "ext4 default (no data= option)",
        );
    }
    if let Some(c) = m.options.iter().find_map(|o| o.strip_prefix("commit=")) {
        f.add("filesystem", "fs.commit_s", c, src);
    } else if m.fs_type.starts_with("ext") {
        f.add(
            "filesystem",
            "fs.commit_s",
            "5",
            "ext4 default (no commit= option)",
        );
    }
    let barrier = if has("nobarrier") || has("barrier=0") {
        "off"
    } else {
        "on"
    };
    f.add("filesystem", "fs.barrier", barrier, src);
    if let Ok(st) = rustix::fs::statvfs(target) {
        f.add(
            "filesystem",
            "fs.block_size",
            st.f_bsize.to_string(),
            "statvfs f_bsize",
        );
        f.add(
            "filesystem",
            "fs.fragment_size",
            st.f_frsize.to_string(),
            "statvfs f_frsize",
        );
        f.add(
            "filesystem",
            "fs.size_bytes",
            (st.f_blocks * st.f_frsize).to_string(),
            "statvfs",
        );
        f.add(
            "filesystem",
            "fs.free_bytes",
            (st.f_bavail * st.f_frsize).to_string(),
            "statvfs",
        );
    }
}

/// The effective access-time mode from mount options. The kernel lists
/// `noatime` or `relatime` when set; strict atime shows as neither.
pub(crate) fn atime_mode(options: &[String]) -> &'static str {
    let has = |o: &str| options.iter().any(|x| x == o);
    let lazy = has("lazytime");
    match (has("noatime"), has("relatime"), lazy) {
        (true, _, _) => "noatime",
        (false, true, false) => "relatime",
        (false, true, true) => "relatime+lazytime",
        (false, false, false) => "strictatime",
        (false, false, true) => "strictatime+lazytime",
    }
}

fn block_chain(f: &mut Facts, dev: &BlockDevice) {
    let sys = PathBuf::from("/sys/class/block").join(&dev.name);
    let chain = if dev.name == dev.disk {
        dev.disk.clone()
    } else {
        format!("{} → {}", dev.name, dev.disk)
    };
    f.add("block", "block.chain", chain, sys.display().to_string());
    f.add("block", "block.disk", dev.disk.clone(), "/sys/dev/block");
    let disk = PathBuf::from("/sys/block").join(&dev.disk);
    if let Some(b) = f.file(
        "block",
        "block.loop_backing_file",
        disk.join("loop/backing_file"),
    ) {
        f.add(
            "block",
            "block.kind",
            format!("loop device backed by {b}"),
            "/sys/block/*/loop",
        );
    } else if dev.disk.starts_with("dm-") || dev.disk.starts_with("md") {
        let slaves: Vec<String> = fs::read_dir(disk.join("slaves"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let name = fs::read_to_string(disk.join("dm/name"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        f.add(
            "block",
            "block.kind",
            format!("{} {name} over {}", &dev.disk[..2], slaves.join(",")),
            "slaves/",
        );
    }
    let q = disk.join("queue");
    for file in [
        "rotational",
        "scheduler",
        "nr_requests",
        "read_ahead_kb",
        "max_sectors_kb",
        "max_hw_sectors_kb",
        "logical_block_size",
        "physical_block_size",
        "optimal_io_size",
        "write_cache",
        "wbt_lat_usec",
    ] {
        let path = q.join(file);
        if let Ok(v) = fs::read_to_string(&path) {
            let v = v.trim();
            let v = if file == "scheduler" {
                active_choice(v).unwrap_or_else(|| v.to_string())
            } else {
                v.to_string()
            };
            f.add(
                "block",
                &format!("block.{file}"),
                v,
                path.display().to_string(),
            );
        }
    }
    if let Some(size) = fs::read_to_string(disk.join("size"))
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        f.add(
            "block",
            "block.size_bytes",
            (size * 512).to_string(),
            disk.join("size").display().to_string(),
        );
    }
    usb(f, &disk);
}

/// For USB storage: negotiated link speed, the device's USB version and the
/// driver (uas or usb-storage), found by walking up the sysfs device path.
fn usb(f: &mut Facts, disk: &Path) {
    let Ok(real) = fs::canonicalize(disk.join("device")) else {
        return;
    };
    if !real.to_string_lossy().contains("/usb") {
        return;
    }
    let mut driver = None;
    let mut p = real.as_path();
    while let Some(parent) = p.parent() {
        if driver.is_none() {
            if let Ok(d) = fs::read_link(parent.join("driver")) {
                let name = d
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if name == "uas" || name == "usb-storage" {
                    driver = Some((name, parent.join("driver")));
                }
            }
        }
        if parent.join("speed").exists() && parent.join("version").exists() {
            f.file("usb", "usb.speed_mbps", parent.join("speed"));
            f.file("usb", "usb.version", parent.join("version"));
            f.file("usb", "usb.product", parent.join("product"));
            break;
        }
        p = parent;
    }
    if let Some((d, src)) = driver {
        f.add("usb", "usb.driver", d, src.display().to_string());
    }
    let uas = Path::new("/sys/module/uas").exists();
    f.add(
        "usb",
        "usb.uas_available",
        if uas { "yes" } else { "no (module not loaded)" },
        "/sys/module/uas",
    );
}

fn vm(f: &mut Facts) {
    for s in super::env::VM_SYSCTLS {
        f.file(
            "vm",
            &format!("vm.{s}"),
            proc::sysctl_path(&format!("vm/{s}")),
        );
    }
    let page = proc::page_size();
    if let Ok(v) = proc::read("vmstat") {
        for line in v.lines() {
            let mut it = line.split_whitespace();
            if let (Some(k @ ("nr_dirty_threshold" | "nr_dirty_background_threshold")), Some(n)) =
                (it.next(), it.next())
            {
                if let Ok(n) = n.parse::<u64>() {
                    f.add(
                        "vm",
                        &format!("vm.{k}_bytes"),
                        (n * page).to_string(),
                        concat!(proc_path!("vmstat"), " (pages × page size)"),
                    );
                }
            }
        }
    }
    for (k, file) in [("mm.thp_enabled", "enabled"), ("mm.thp_defrag", "defrag")] {
        let path = format!("/sys/kernel/mm/transparent_hugepage/{file}");
        if let Ok(v) = fs::read_to_string(&path) {
            f.add(
                "vm",
                k,
                active_choice(v.trim()).unwrap_or_else(|| v.trim().to_string()),
                path,
            );
        }
    }
    if let Ok(mi) = proc::read("meminfo") {
        let get = |k: &str| proc::keyed::kib_bytes(&mi, k);
        for (k, name) in [
            ("MemTotal", "mem.total_bytes"),
            ("MemAvailable", "mem.available_bytes"),
        ] {
            if let Some(v) = get(k) {
                f.add("memory", name, v.to_string(), proc_path!("meminfo"));
            }
        }
        let kernel: u64 = ["Slab", "KernelStack", "PageTables", "VmallocUsed", "Percpu"]
            .iter()
            .filter_map(|k| get(k))
            .sum();
        f.add(
            "memory",
            "mem.kernel_dynamic_bytes",
            kernel.to_string(),
            concat!(
                proc_path!("meminfo"),
                " Slab+KernelStack+PageTables+VmallocUsed+Percpu"
            ),
        );
        if let (Some(phys), Some(total)) = (physical_memory(), get("MemTotal")) {
            f.add(
                "memory",
                "mem.physical_bytes",
                phys.to_string(),
                "/sys/devices/system/memory (online blocks)",
            );
            f.add(
                "memory",
                "mem.kernel_reserved_bytes",
                phys.saturating_sub(total).to_string(),
                "physical − MemTotal (kernel image, page structs, reservations)",
            );
        }
    }
}

/// Online memory from the memory-hotplug blocks, when the kernel exposes them.
fn physical_memory() -> Option<u64> {
    let base = Path::new("/sys/devices/system/memory");
    let block = u64::from_str_radix(
        fs::read_to_string(base.join("block_size_bytes"))
            .ok()?
            .trim(),
        16,
    )
    .ok()?;
    let online = fs::read_dir(base)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("memory"))
        .filter(|e| {
            fs::read_to_string(e.path().join("online"))
                .map(|s| s.trim() == "1")
                .unwrap_or(false)
        })
        .count() as u64;
    (online > 0).then_some(online * block)
}

fn cpu(f: &mut Facts) {
    let cpus = Path::new("/sys/devices/system/cpu");
    let mut govs: Vec<String> = Vec::new();
    let mut n = 0;
    while let Ok(g) = fs::read_to_string(cpus.join(format!("cpu{n}/cpufreq/scaling_governor"))) {
        govs.push(g.trim().to_string());
        n += 1;
    }
    if govs.is_empty() {
        f.add(
            "cpu",
            "cpu.governor",
            "none (no cpufreq: fixed frequency or a VM)",
            "/sys/devices/system/cpu/cpu0/cpufreq",
        );
    } else {
        govs.sort();
        govs.dedup();
        f.add(
            "cpu",
            "cpu.governor",
            govs.join(","),
            "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
        );
        f.file(
            "cpu",
            "cpu.driver",
            cpus.join("cpu0/cpufreq/scaling_driver"),
        );
    }
    let idle = cpus.join("cpu0/cpuidle");
    let mut states = Vec::new();
    for i in 0.. {
        let d = idle.join(format!("state{i}"));
        let Ok(name) = fs::read_to_string(d.join("name")) else {
            break;
        };
        let lat = fs::read_to_string(d.join("latency")).unwrap_or_default();
        states.push(format!("{} ({} µs)", name.trim(), lat.trim()));
    }
    if states.is_empty() {
        f.add(
            "cpu",
            "cpu.idle_states",
            "none exposed",
            idle.display().to_string(),
        );
    } else {
        f.add(
            "cpu",
            "cpu.idle_states",
            states.join(", "),
            idle.display().to_string(),
        );
    }
    if let Ok(d) = fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver") {
        f.add(
            "cpu",
            "cpu.idle_driver",
            d.trim(),
            "/sys/devices/system/cpu/cpuidle/current_driver",
        );
    }
}

fn kernel(f: &mut Facts) {
    let uts = rustix::system::uname();
    let release = uts.release().to_string_lossy().into_owned();
    f.add("kernel", "kernel.release", release.clone(), "uname");
    f.file("kernel", "kernel.cmdline", proc::path("cmdline"));
    // Boot to userspace: pid 1's start time, in clock ticks after boot.
    if let Ok(stat) = proc::read_pid(1, "stat") {
        if let Some(ticks) = proc::Stat::parse(&stat).and_then(|s| s.starttime()) {
            let ticks = ticks as f64;
            let hz = proc::ticks_per_second() as f64;
            f.add(
                "kernel",
                "kernel.boot_to_init_s",
                format!("{:.2}", ticks / hz),
                concat!(proc_path!("1/stat"), " starttime"),
            );
        }
    }
    for path in [
        format!("/boot/vmlinuz-{release}"),
        format!("/boot/vmlinux-{release}"),
    ] {
        if let Ok(m) = fs::metadata(&path) {
            f.add("kernel", "kernel.image_bytes", m.len().to_string(), path);
            break;
        }
    }
    if let Ok(mods) = proc::read("modules") {
        let sizes: Vec<u64> = mods
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
            .collect();
        f.add(
            "kernel",
            "kernel.modules",
            format!(
                "{} loaded, {} bytes",
                sizes.len(),
                sizes.iter().sum::<u64>()
            ),
            proc_path!("modules"),
        );
    } else {
        f.add(
            "kernel",
            "kernel.modules",
            "none (no /proc/modules: monolithic kernel)",
            proc_path!("modules"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(s: &str) -> Vec<String> {
        s.split(',').map(String::from).collect()
    }

    #[test]
    fn atime_modes() {
        assert_eq!(atime_mode(&opts("rw,relatime")), "relatime");
        assert_eq!(atime_mode(&opts("rw,noatime")), "noatime");
        assert_eq!(atime_mode(&opts("rw")), "strictatime");
        assert_eq!(
            atime_mode(&opts("rw,relatime,lazytime")),
            "relatime+lazytime"
        );
    }

    #[test]
    fn inspects_the_root_filesystem() {
        let f = inspect(Some(Path::new("/")));
        assert!(f.get("fs.type").is_some());
        assert!(f.get("vm.dirty_ratio").is_some());
        assert!(f.get("kernel.release").is_some());
        assert!(f.0.iter().all(|x| !x.source.is_empty()));
    }
}
