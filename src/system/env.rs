//! Environment snapshot: the facts a result depends on, recorded with every run.
//!
//! The snapshot is a flat map with dotted keys so that two runs can be diffed
//! key by key. It never fails: a fact that cannot be read is simply absent
//! (e.g. `cpu.governor` on a VM without cpufreq).
//!
//! libc: sysconf, _SC_NPROCESSORS_ONLN (rustix has no count of online CPUs)

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::proc::Current;

use super::device::{active_choice, device_for_path, queue_setting};
use super::mounts::mount_for_path;

/// Flat, ordered key -> value facts.
pub(crate) type Environment = BTreeMap<String, String>;

/// Queue attributes recorded for the target's disk: key suffix -> sysfs file.
const QUEUE_FILES: &[(&str, &str)] = &[
    ("scheduler", "scheduler"),
    ("read_ahead_kb", "read_ahead_kb"),
    ("rotational", "rotational"),
    ("nr_requests", "nr_requests"),
    ("max_sectors_kb", "max_sectors_kb"),
    ("logical_block_size", "logical_block_size"),
    ("physical_block_size", "physical_block_size"),
    ("write_cache", "write_cache"),
];

/// Writeback / swap sysctls under /proc/sys/vm. procfs 0.17's `sys::vm`
/// module does not cover these, so they are read as plain files.
pub(crate) const VM_SYSCTLS: &[&str] = &[
    "dirty_ratio",
    "dirty_background_ratio",
    "dirty_bytes",
    "dirty_background_bytes",
    "dirty_expire_centisecs",
    "dirty_writeback_centisecs",
    "swappiness",
];

/// Record the environment. `target` is the directory an experiment works in
/// (its filesystem, mount and disk are recorded); `argv` is the command line.
pub(crate) fn snapshot(target: Option<&Path>, argv: &[String]) -> Environment {
    let mut env = Environment::new();
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            env.insert(k.to_string(), v);
        }
    };

    let uts = rustix::system::uname();
    put(
        "host.name",
        Some(uts.nodename().to_string_lossy().into_owned()),
    );
    let found = machine_id(Path::new("/")).or_else(|| generated_machine_id(&super::state_dir()));
    if let Some((id, source)) = found {
        put("machine.id", Some(id));
        put("machine.id_source", Some(source));
    }
    put(
        "kernel.release",
        Some(uts.release().to_string_lossy().into_owned()),
    );
    put(
        "kernel.version",
        Some(uts.version().to_string_lossy().into_owned()),
    );
    put(
        "kernel.cmdline",
        read_trimmed(&super::proc::name("cmdline")),
    );

    if let Ok(info) = super::proc::CpuInfo::current() {
        let model = cpu_model(&|f: &str| info.get_field(0, f).map(str::to_string));
        put("cpu.model", model);
    }
    put("cpu.count", online_cpus().map(|n| n.to_string()));
    put(
        "cpu.governor",
        read_trimmed("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
    );
    put(
        "cpu.max_mhz",
        read_trimmed("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
            .and_then(|khz| khz.parse::<u64>().ok())
            .map(|khz| (khz / 1000).to_string()),
    );

    if let Ok(mem) = super::proc::Meminfo::current() {
        put("mem.total_bytes", Some(mem.mem_total.to_string()));
        put(
            "mem.available_bytes",
            mem.mem_available.map(|v| v.to_string()),
        );
    }

    put(
        "mm.thp_enabled",
        read_trimmed("/sys/kernel/mm/transparent_hugepage/enabled").and_then(|s| active_choice(&s)),
    );
    put(
        "mm.thp_defrag",
        read_trimmed("/sys/kernel/mm/transparent_hugepage/defrag").and_then(|s| active_choice(&s)),
    );
    for name in VM_SYSCTLS {
        put(
            &format!("vm.{name}"),
            read_trimmed(&super::proc::sysctl_name(&format!("vm/{name}"))),
        );
    }

    put("tool.version", Some(env!("CARGO_PKG_VERSION").to_string()));
    put("tool.argv", Some(join_argv(argv)));

    if let Some(target) = target {
        let canon = fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
        put("target.path", Some(canon.display().to_string()));
        if let Some(m) = mount_for_path(&canon) {
            put("target.fs", Some(m.fs_type.clone()));
            put(
                "target.mount_point",
                Some(m.mount_point.display().to_string()),
            );
            put("target.mount_options", Some(m.options.join(",")));
            put("target.mount_source", Some(m.source.clone()));
        }
        if let Some(dev) = device_for_path(&canon) {
            for (key, file) in QUEUE_FILES {
                put(&format!("block.{key}"), queue_setting(&dev.disk, file));
            }
            for (key, value, _) in super::flash::facts(Path::new("/"), &dev.disk) {
                put(&key, Some(value));
            }
            put("target.device", Some(dev.name));
            put("target.disk", Some(dev.disk));
        }
    }
    env
}

/// Files a stable machine identity can come from, most specific first:
/// systemd/dbus machine ids, then the board's device-tree serial number and
/// the SoC serial some ARM kernels print in /proc/cpuinfo.
/// Each is in the root's /proc (`true`) or relative to the root itself.
const MACHINE_ID_FILES: &[(bool, &str)] = &[
    (false, "etc/machine-id"),
    (false, "var/lib/dbus/machine-id"),
    (true, "device-tree/serial-number"),
    (false, "sys/firmware/devicetree/base/serial-number"),
];

/// A stable id for this machine under `root` ("/" normally; a fixture tree
/// in tests) and the file it was derived from. The raw machine-id is not
/// recorded (systemd asks that it not be exposed): the id is a 128-bit
/// FNV-1a digest of it, salted with "tunelab", stable across tunelab builds.
/// None when the machine has none of the sources (host.name is then its
/// only identity).
pub(crate) fn machine_id(root: &Path) -> Option<(String, String)> {
    let proc_ = super::proc::Root::under(root);
    let mut sources: Vec<(String, String)> = MACHINE_ID_FILES
        .iter()
        .filter_map(|&(in_proc, f)| {
            let (path, name) = if in_proc {
                (proc_.file(f), super::proc::name(f))
            } else {
                (root.join(f), format!("/{f}"))
            };
            let raw = fs::read(path).ok()?;
            let text = String::from_utf8_lossy(&raw)
                .trim_matches(|c: char| c.is_whitespace() || c == '\0')
                .to_string();
            Some((text, name))
        })
        .collect();
    if let Ok(info) = proc_.read("cpuinfo") {
        let serial = info.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "Serial").then(|| v.trim().to_string())
        });
        if let Some(s) = serial {
            sources.push((
                s,
                concat!(super::proc::proc_path!("cpuinfo"), " Serial").into(),
            ));
        }
    }
    if let Some((mac, iface)) = first_real_mac(root) {
        sources.push((mac, format!("MAC address of {iface}")));
    }
    sources
        .into_iter()
        .find(|(v, _)| !v.is_empty() && v.chars().any(|c| c != '0'))
        .map(|(v, src)| (digest128(&v), src))
}

/// The MAC address of the first network interface (by name) that is real
/// hardware (it has a `device` link in sysfs) with a globally unique,
/// burnt-in address. Locally administered addresses (bit 1 of the first
/// octet) are skipped: boards without a MAC in their fuses make one up at
/// every boot, and USB gadgets and bridges do too.
fn first_real_mac(root: &Path) -> Option<(String, String)> {
    let net = root.join("sys/class/net");
    let mut names: Vec<String> = fs::read_dir(&net)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n != "lo")
        .collect();
    names.sort();
    names.into_iter().find_map(|n| {
        let dir = net.join(&n);
        if !dir.join("device").exists() {
            return None;
        }
        let mac = fs::read_to_string(dir.join("address")).ok()?;
        let mac = mac.trim().to_ascii_lowercase();
        let first = u8::from_str_radix(mac.get(..2)?, 16).ok()?;
        let zero = mac.chars().all(|c| c == '0' || c == ':');
        (mac.len() == 17 && first & 0x02 == 0 && !zero).then_some((mac, n))
    })
}

/// The last resort when the machine has no identity of its own (a busybox
/// board with no machine-id, serial or burnt-in MAC): a random id generated
/// once and kept as `machine-id` in tunelab's state directory, so every run
/// of this installation carries the same id. None when the directory cannot
/// be written (then runs have only their host name).
pub(crate) fn generated_machine_id(state: &Path) -> Option<(String, String)> {
    let path = state.join("machine-id");
    let source = format!("generated once, kept in {}", path.display());
    let read = |p: &Path| -> Option<String> {
        let t = fs::read_to_string(p).ok()?;
        let t = t.trim();
        (t.len() == 32 && t.chars().all(|c| c.is_ascii_hexdigit())).then(|| t.to_string())
    };
    if let Some(id) = read(&path) {
        return Some((digest128(&id), source));
    }
    fs::create_dir_all(state).ok()?;
    let id = format!("{:032x}", rand::random::<u128>());
    // create_new: two first runs racing keep whichever id was written first.
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{id}\n").as_bytes()));
    match written {
        Ok(()) => Some((digest128(&id), source)),
        Err(_) => read(&path).map(|id| (digest128(&id), source)),
    }
}

/// FNV-1a over `tunelab:` + text, as 128 bits of hex.
fn digest128(text: &str) -> String {
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for b in b"tunelab:".iter().chain(text.as_bytes()) {
        h ^= *b as u128;
        h = h.wrapping_mul(0x0000000001000000000000000000013B);
    }
    format!("{h:032x}")
}

/// Join argv for display, quoting for a POSIX shell only where needed so the
/// line can be pasted back to reproduce the run.
pub(crate) fn join_argv(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quote one word for a POSIX shell: safe words are left alone, everything
/// else is single-quoted with embedded `'` written as `'\''`.
pub(crate) fn shell_quote(s: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-+=:,./@%^".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Online logical CPUs from /sys/devices/system/cpu/online ("0-3,6"),
/// falling back to sysconf when sysfs is unavailable.
fn online_cpus() -> Option<usize> {
    read_trimmed("/sys/devices/system/cpu/online")
        .and_then(|s| super::sysfs::parse_cpu_list(&s))
        .map(|cpus| cpus.len())
        .filter(|&n| n > 0)
        .or_else(|| {
            // SAFETY: sysconf has no memory-safety preconditions.
            let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
            (n > 0).then_some(n as usize)
        })
}

fn read_trimmed(path: &str) -> Option<String> {
    let s = fs::read_to_string(path).ok()?;
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The CPU's name from the first core's /proc/cpuinfo fields: x86 has
/// "model name"; ARM kernels have "Processor" (32-bit, old) or only the
/// MIDR fields, named as `inspect` does ("ARM Cortex-A53"); "Hardware" is
/// the SoC, a last resort.
fn cpu_model(field: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let midr = |f: &str| {
        let v = field(f)?;
        u32::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok()
    };
    field("model name")
        .or_else(|| field("Processor"))
        .map(|s| s.trim().to_string())
        .or_else(|| {
            Some(super::board::core_name(
                midr("CPU implementer")?,
                midr("CPU part")?,
            ))
        })
        .or_else(|| field("Hardware").map(|s| s.trim().to_string()))
        .or_else(|| field("cpu model").map(|s| s.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::test_support::put;

    #[test]
    fn an_arm_core_without_model_name_is_named_from_its_midr() {
        // /proc/cpuinfo of the lab's qemu cortex-a53 guest (arm64 kernel).
        let arm = [
            ("processor", "0"),
            ("BogoMIPS", "125.00"),
            ("CPU implementer", "0x41"),
            ("CPU architecture", "8"),
            ("CPU variant", "0x0"),
            ("CPU part", "0xd03"),
        ];
        let get = |f: &str| {
            arm.iter()
                .find(|(k, _)| *k == f)
                .map(|(_, v)| v.to_string())
        };
        assert_eq!(cpu_model(&get).as_deref(), Some("ARM Cortex-A53"));
        let x86 = |f: &str| (f == "model name").then(|| " AMD EPYC ".to_string());
        assert_eq!(cpu_model(&x86).as_deref(), Some("AMD EPYC"));
        assert_eq!(cpu_model(&|_: &str| None), None);
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("run"), "run");
        assert_eq!(shell_quote("record=4k,64k"), "record=4k,64k");
        assert_eq!(shell_quote("/tmp/x"), "/tmp/x");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
        assert_eq!(shell_quote("a*"), "'a*'");
        let argv: Vec<String> = ["tunelab", "run", "io.x", "--label", "before change"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(join_argv(&argv), "tunelab run io.x --label 'before change'");
        assert_eq!(join_argv(&[]), "");
    }

    #[test]
    fn machine_id_is_derived_from_the_first_source_present() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(machine_id(root.path()), None);
        // A board without /etc/machine-id: the SoC serial from cpuinfo.
        put(
            root.path(),
            "proc/cpuinfo",
            "processor\t: 0\nCPU implementer\t: 0x41\n\nSerial\t\t: 00000000a1b2c3d4\n",
        );
        let (pi, src) = machine_id(root.path()).unwrap();
        assert_eq!(src, "/proc/cpuinfo Serial");
        assert_eq!(pi.len(), 32);
        // The device-tree serial (NUL-terminated, as the kernel exposes it) wins over it.
        put(root.path(), "proc/device-tree/serial-number", "ABC123\0");
        let (dt, src) = machine_id(root.path()).unwrap();
        assert_eq!(src, "/proc/device-tree/serial-number");
        assert_ne!(dt, pi);
        // /etc/machine-id wins over all; the raw id is never the result.
        let raw = "4c4c4544004d3510804ab4c04f4e4d32";
        put(root.path(), "etc/machine-id", &format!("{raw}\n"));
        let (id, src) = machine_id(root.path()).unwrap();
        assert_eq!(src, "/etc/machine-id");
        assert_ne!(id, raw);
        // Stable: the same input gives the same id (fixed FNV-1a, not std's hasher).
        assert_eq!(digest128(raw), id);
        // Computed independently (Python) for the FNV-1a 128 parameters.
        assert_eq!(digest128(""), "03fe74e66d659b9224a6edbdbfbeab78");
    }

    #[test]
    fn a_burnt_in_mac_identifies_a_board_without_ids() {
        let root = tempfile::tempdir().unwrap();
        let iface = |name: &str, mac: &str, real: bool| {
            let d = root.path().join("sys/class/net").join(name);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("address"), format!("{mac}\n")).unwrap();
            if real {
                fs::create_dir_all(d.join("device")).unwrap();
            }
        };
        iface("lo", "00:00:00:00:00:00", false);
        iface("br0", "52:54:00:12:34:56", false);
        // A board that makes up a MAC at boot: locally administered, skipped.
        iface("eth0", "02:1a:2b:3c:4d:5e", true);
        assert_eq!(machine_id(root.path()), None);
        iface("eth1", "00:1A:2B:3C:4D:5F", true);
        let (id, src) = machine_id(root.path()).unwrap();
        assert_eq!(src, "MAC address of eth1");
        assert_eq!(id, digest128("00:1a:2b:3c:4d:5f"));
    }

    #[test]
    fn a_generated_id_is_kept_in_the_state_directory() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("tunelab");
        let (a, src) = generated_machine_id(&dir).unwrap();
        assert!(src.contains("machine-id"), "{src}");
        assert_eq!(a.len(), 32);
        // The second run (and every later one) reads the same id back.
        assert_eq!(generated_machine_id(&dir).unwrap().0, a);
        // Another installation gets another id.
        let other = tempfile::tempdir().unwrap();
        assert_ne!(generated_machine_id(other.path()).unwrap().0, a);
    }

    #[test]
    fn snapshot_has_core_keys() {
        let argv = vec!["tunelab".to_string(), "inspect".to_string()];
        let env = snapshot(Some(Path::new("/")), &argv);
        for key in [
            "host.name",
            "kernel.release",
            "kernel.version",
            "cpu.count",
            "mem.total_bytes",
            "vm.dirty_ratio",
            "vm.swappiness",
            "tool.version",
            "tool.argv",
            "target.path",
            "target.fs",
            "target.mount_point",
            "target.mount_options",
        ] {
            assert!(env.contains_key(key), "missing {key}: {env:?}");
        }
        assert_eq!(env["tool.argv"], "tunelab inspect");
        assert_eq!(env["target.path"], "/");
        if env.contains_key("target.disk") {
            assert!(env.contains_key("block.logical_block_size"));
        }
        // No target: no target.* or block.* keys.
        let env = snapshot(None, &[]);
        assert!(!env
            .keys()
            .any(|k| k.starts_with("target.") || k.starts_with("block.")));
    }
}
