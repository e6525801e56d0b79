//! CPU facts the `cpu.*` experiments set beside their measurements: cores
//! and their clusters (cpufreq policy, MIDR core type, cpu_capacity), what
//! cpufreq claims per core, the OPP table, and a one-second sample of every
//! clock, temperature, cooling state and throttle counter. Every path is
//! read below `root` ("/" normally, a fixture tree in tests), laid out as
//! the kernel documents it (cpu-freq/cpufreq-stats, thermal/sysfs-api,
//! hwmon/sysfs-interface, cgroup v1 cpu/cpuacct and cgroup v2 cpu).
//! A missing file is a missing fact, never an error.

use std::fs;
use std::path::{Path, PathBuf};

use super::facts::Facts;
use super::proc;
use super::sysfs::sorted_entries;
pub(crate) use super::sysfs::{cpu_list, parse_cpu_list};

fn read(root: &Path, rel: &str) -> Option<String> {
    trimmed(fs::read_to_string(root.join(rel)))
}

/// A file's text without surrounding blanks and NULs; None when unreadable
/// or empty.
fn trimmed(text: std::io::Result<String>) -> Option<String> {
    let s = text.ok()?;
    let s = s.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    (!s.is_empty()).then(|| s.to_string())
}

fn read_u64(root: &Path, rel: &str) -> Option<u64> {
    read(root, rel)?.parse().ok()
}

/// One core as sysfs and /proc/cpuinfo describe it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Core {
    pub(crate) cpu: usize,
    /// The cpufreq policy directory ("policy4") the core belongs to.
    pub(crate) policy: Option<String>,
    /// "ARM Cortex-A53" from the MIDR fields, or x86's model name.
    pub(crate) core: Option<String>,
    /// cpu_capacity (1024 = the biggest core), on big.LITTLE kernels.
    pub(crate) capacity: Option<u64>,
    /// cpufreq's claims in kHz: hardware limits, governor limit, current.
    pub(crate) max_khz: Option<u64>,
    pub(crate) min_khz: Option<u64>,
    pub(crate) scaling_max_khz: Option<u64>,
    pub(crate) cur_khz: Option<u64>,
    pub(crate) governor: Option<String>,
    /// "cpu MHz" of /proc/cpuinfo (x86; arm64 shows none).
    pub(crate) cpuinfo_mhz: Option<f64>,
}

fn cpu_dir(cpu: usize) -> String {
    format!("sys/devices/system/cpu/cpu{cpu}")
}

/// CPUs online under `root` (sys/devices/system/cpu/online, else cpuN dirs).
pub(crate) fn online_cpus(root: &Path) -> Vec<usize> {
    if let Some(s) = read(root, "sys/devices/system/cpu/online") {
        let v = cpu_list(&s);
        if !v.is_empty() {
            return v;
        }
    }
    let mut v: Vec<usize> = fs::read_dir(root.join("sys/devices/system/cpu"))
        .map(|d| {
            d.filter_map(|e| {
                let n = e.ok()?.file_name().to_string_lossy().into_owned();
                n.strip_prefix("cpu")?.parse().ok()
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Per-CPU fields of /proc/cpuinfo: (processor, "cpu MHz", core name).
fn cpuinfo(root: &Path) -> Vec<(usize, Option<f64>, Option<String>)> {
    let names = super::board::core_names(root);
    let Some(info) = trimmed(proc::Root::under(root).read("cpuinfo")) else {
        return Vec::new();
    };
    info.split("\n\n")
        .filter_map(|block| {
            let field = |name: &str| {
                block.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.trim() == name).then(|| v.trim().to_string())
                })
            };
            let cpu: usize = field("processor")?.parse().ok()?;
            let mhz = field("cpu MHz").and_then(|v| v.parse().ok());
            let name = names
                .iter()
                .find(|(c, _, _)| *c == cpu)
                .map(|(_, n, _)| n.clone())
                .or_else(|| field("model name"));
            Some((cpu, mhz, name))
        })
        .collect()
}

/// Every online core with what cpufreq and /proc/cpuinfo say about it now.
pub(crate) fn cores(root: &Path) -> Vec<Core> {
    let info = cpuinfo(root);
    online_cpus(root)
        .into_iter()
        .map(|cpu| {
            let d = cpu_dir(cpu);
            let f = |n: &str| read_u64(root, &format!("{d}/cpufreq/{n}"));
            // cpuN/cpufreq is a link to ../cpufreq/policyM: its target names the policy.
            let policy = fs::read_link(root.join(format!("{d}/cpufreq")))
                .ok()
                .and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
                .filter(|n| n.starts_with("policy"))
                .or_else(|| policy_of(root, cpu));
            let (mhz, core) = info
                .iter()
                .find(|(c, _, _)| *c == cpu)
                .map(|(_, m, n)| (*m, n.clone()))
                .unwrap_or_default();
            Core {
                cpu,
                policy,
                core,
                capacity: read_u64(root, &format!("{d}/cpu_capacity")),
                max_khz: f("cpuinfo_max_freq"),
                min_khz: f("cpuinfo_min_freq"),
                scaling_max_khz: f("scaling_max_freq"),
                cur_khz: f("scaling_cur_freq"),
                governor: read(root, &format!("{d}/cpufreq/scaling_governor")),
                cpuinfo_mhz: mhz,
            }
        })
        .collect()
}

/// The policy whose related_cpus lists `cpu` (fixture trees without links).
fn policy_of(root: &Path, cpu: usize) -> Option<String> {
    let dir = root.join("sys/devices/system/cpu/cpufreq");
    let mut names: Vec<String> = fs::read_dir(dir)
        .ok()?
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("policy"))
        .collect();
    names.sort();
    names.into_iter().find(|p| {
        read(
            root,
            &format!("sys/devices/system/cpu/cpufreq/{p}/related_cpus"),
        )
        .is_some_and(|s| cpu_list(&s).contains(&cpu))
    })
}

/// Cores that change clock together: one cpufreq policy, else the same core
/// type and capacity (a kernel without cpufreq still tells big from LITTLE).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Cluster {
    pub(crate) cpus: Vec<usize>,
    /// How the cluster was identified ("policy4", "core type and capacity").
    pub(crate) by: String,
    pub(crate) core: Option<String>,
    pub(crate) capacity: Option<u64>,
    pub(crate) max_khz: Option<u64>,
}

impl Cluster {
    /// "cluster policy0: CPUs 0-3, ARM Cortex-A53, capacity 1024, max 1200 MHz".
    pub(crate) fn describe(&self) -> String {
        let mut s = format!("{}: CPUs {}", self.by, list_text(&self.cpus));
        if let Some(c) = &self.core {
            s.push_str(&format!(", {c}"));
        }
        if let Some(c) = self.capacity {
            s.push_str(&format!(", capacity {c}"));
        }
        if let Some(k) = self.max_khz {
            s.push_str(&format!(", max {} MHz", k / 1000));
        }
        s
    }
}

/// "0-3,6" for a sorted CPU list.
pub(crate) fn list_text(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Group `cores` into clusters, in the order of their lowest CPU.
pub(crate) fn clusters(cores: &[Core]) -> Vec<Cluster> {
    let key = |c: &Core| match &c.policy {
        Some(p) => p.clone(),
        None => "core type and capacity".to_string(),
    };
    let mut out: Vec<(String, Option<String>, Option<u64>, Cluster)> = Vec::new();
    for c in cores {
        let k = key(c);
        let same = |(kk, core, cap, _): &&mut (String, Option<String>, Option<u64>, Cluster)| {
            *kk == k && (c.policy.is_some() || (*core == c.core && *cap == c.capacity))
        };
        match out.iter_mut().find(|e| same(e)) {
            Some(e) => e.3.cpus.push(c.cpu),
            None => out.push((
                k.clone(),
                c.core.clone(),
                c.capacity,
                Cluster {
                    cpus: vec![c.cpu],
                    by: k,
                    core: c.core.clone(),
                    capacity: c.capacity,
                    max_khz: c.max_khz,
                },
            )),
        }
    }
    out.into_iter().map(|e| e.3).collect()
}

/// OPP table and governor per cpufreq policy, for `inspect`: available
/// frequencies (or the stats table's), time spent at each, transitions.
pub(crate) fn opp_facts(root: &Path, f: &mut Facts) {
    let base = "sys/devices/system/cpu/cpufreq";
    let Ok(d) = fs::read_dir(root.join(base)) else {
        return;
    };
    let mut policies: Vec<(usize, String)> = d
        .filter_map(|e| {
            let n = e.ok()?.file_name().to_string_lossy().into_owned();
            Some((n.strip_prefix("policy")?.parse().ok()?, n))
        })
        .collect();
    policies.sort();
    for (_, p) in policies {
        let rel = format!("{base}/{p}");
        let cpus = read(root, &format!("{rel}/related_cpus")).unwrap_or_default();
        let gov = read(root, &format!("{rel}/scaling_governor")).unwrap_or_else(|| "?".into());
        let lim = |n: &str| {
            read_u64(root, &format!("{rel}/{n}"))
                .map(|k| format!("{} MHz", k / 1000))
                .unwrap_or_else(|| "?".into())
        };
        f.add(
            "cpu",
            &format!("cpu.{p}.governor"),
            format!(
                "CPUs {cpus}: {gov}, limits {}-{} (hardware {}-{})",
                lim("scaling_min_freq"),
                lim("scaling_max_freq"),
                lim("cpuinfo_min_freq"),
                lim("cpuinfo_max_freq")
            ),
            format!("/{rel}/{{related_cpus,scaling_governor,scaling_*_freq,cpuinfo_*_freq}}"),
        );
        // time_in_state: "<kHz> <10 ms units>" per OPP; its first column is the table.
        let stats = read(root, &format!("{rel}/stats/time_in_state"));
        let opps: Vec<(u64, Option<u64>)> = match &stats {
            Some(t) => t
                .lines()
                .filter_map(|l| {
                    let mut w = l.split_whitespace();
                    Some((w.next()?.parse().ok()?, w.next()?.parse().ok()))
                })
                .collect(),
            None => read(root, &format!("{rel}/scaling_available_frequencies"))
                .map(|s| {
                    s.split_whitespace()
                        .filter_map(|v| Some((v.parse().ok()?, None)))
                        .collect()
                })
                .unwrap_or_default(),
        };
        if opps.is_empty() {
            continue;
        }
        let total: u64 = opps.iter().filter_map(|o| o.1).sum();
        let table: Vec<String> = opps
            .iter()
            .map(|(k, t)| match t {
                Some(t) if total > 0 => {
                    format!("{} ({:.0}%)", k / 1000, *t as f64 * 100.0 / total as f64)
                }
                _ => format!("{}", k / 1000),
            })
            .collect();
        let mut v = format!("{} MHz", table.join(", "));
        if total > 0 {
            v.push_str(" — share of time at each since boot");
        }
        if let Some(n) = read(root, &format!("{rel}/stats/total_trans")) {
            v.push_str(&format!("; {n} transitions"));
        }
        f.add(
            "cpu",
            &format!("cpu.{p}.opp"),
            v,
            if stats.is_some() {
                format!("/{rel}/stats/time_in_state, total_trans")
            } else {
                format!("/{rel}/scaling_available_frequencies")
            },
        );
    }
}

/// One reading of everything that can slow a busy CPU down.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sample {
    /// scaling_cur_freq per online CPU, kHz (None: not exposed).
    pub(crate) cur_khz: Vec<(usize, Option<u64>)>,
    /// Thermal zones and hwmon inputs: (name, °C).
    pub(crate) temps: Vec<(String, f64)>,
    /// Cooling devices: (name, cur_state, max_state).
    pub(crate) cooling: Vec<(String, u64, u64)>,
    /// Throttle counters (x86 thermal_throttle): (name, count).
    pub(crate) throttle: Vec<(String, u64)>,
    /// /proc/stat "cpu" line: steal and all ticks.
    pub(crate) steal_ticks: u64,
    pub(crate) total_ticks: u64,
    /// Busy ticks (all but idle, iowait and steal) of the whole machine.
    pub(crate) busy_ticks: u64,
    pub(crate) quota: Option<Quota>,
}

/// The CPU bandwidth limit of the cgroup this process runs in.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Quota {
    /// Allowed CPU time per period, µs (None: unlimited).
    pub(crate) quota_us: Option<u64>,
    pub(crate) period_us: u64,
    /// Periods in which the group was throttled, and time throttled (ns).
    pub(crate) nr_throttled: u64,
    pub(crate) throttled_ns: u64,
    /// Where it was read (the cgroup directory).
    pub(crate) dir: PathBuf,
}

impl Quota {
    /// CPUs' worth of time allowed (None: unlimited).
    pub(crate) fn cpus(&self) -> Option<f64> {
        self.quota_us
            .map(|q| q as f64 / self.period_us.max(1) as f64)
    }
}

/// The cgroup directory holding this process's CPU controller, and whether
/// it is cgroup v2: /proc/self/cgroup names the path, mountinfo the mount.
pub(crate) fn cpu_cgroup_dir(root: &Path) -> Option<(PathBuf, bool)> {
    let proc_ = proc::Root::under(root);
    let cg = trimmed(proc_.read_pid("self", "cgroup"))?;
    let mounts = trimmed(proc_.read_pid("self", "mountinfo"))?;
    // v1 first: "4:cpu,cpuacct:/path"; then v2 "0::/path".
    let v1 = cg.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (_, ctl, path) = (it.next()?, it.next()?, it.next()?);
        ctl.split(',').any(|c| c == "cpu").then_some(path)
    });
    let (path, v2) = match v1 {
        Some(p) => (p, false),
        None => (cg.lines().find_map(|l| l.strip_prefix("0::"))?, true),
    };
    let mount = mounts.lines().find_map(|l| {
        // "id parent maj:min root mountpoint opts ... - fstype source superopts"
        let (pre, post) = l.split_once(" - ")?;
        let mut post = post.split_whitespace();
        let fstype = post.next()?;
        let superopts = post.nth(1).unwrap_or("");
        let ok = if v2 {
            fstype == "cgroup2"
        } else {
            fstype == "cgroup" && superopts.split(',').any(|o| o == "cpu")
        };
        ok.then(|| {
            let f: Vec<&str> = pre.split_whitespace().collect();
            (
                f.get(3).copied().unwrap_or("/"),
                f.get(4).copied().unwrap_or(""),
            )
        })
    })?;
    // A mount of a sub-tree ("root" column not "/") holds paths relative to it.
    let rel = path.strip_prefix(mount.0).unwrap_or(path);
    let dir = root
        .join(mount.1.trim_start_matches('/'))
        .join(rel.trim_start_matches('/'));
    Some((dir, v2))
}

/// The CPU quota of this process's cgroup, if the controller is mounted.
pub(crate) fn quota(root: &Path) -> Option<Quota> {
    let (dir, v2) = cpu_cgroup_dir(root)?;
    let rd = |n: &str| fs::read_to_string(dir.join(n)).ok();
    let stat = rd("cpu.stat").unwrap_or_default();
    let field = |k: &str| {
        stat.lines().find_map(|l| {
            let (a, b) = l.split_once(' ')?;
            (a == k).then(|| b.trim().parse::<u64>().ok())?
        })
    };
    let nr_throttled = field("nr_throttled").unwrap_or(0);
    if v2 {
        let max = rd("cpu.max")?;
        let mut w = max.split_whitespace();
        let q = w.next()?;
        let period = w.next().and_then(|p| p.parse().ok()).unwrap_or(100_000);
        Some(Quota {
            quota_us: q.parse().ok(),
            period_us: period,
            nr_throttled,
            throttled_ns: field("throttled_usec").unwrap_or(0) * 1000,
            dir,
        })
    } else {
        let q: i64 = rd("cpu.cfs_quota_us")?.trim().parse().ok()?;
        let period = rd("cpu.cfs_period_us")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(100_000);
        Some(Quota {
            quota_us: (q > 0).then_some(q as u64),
            period_us: period,
            nr_throttled,
            throttled_ns: field("throttled_time").unwrap_or(0),
            dir,
        })
    }
}

/// Read everything once (a few dozen small files: cheap enough at 1 Hz).
pub(crate) fn sample(root: &Path, cpus: &[usize]) -> Sample {
    let mut s = Sample {
        cur_khz: cpus
            .iter()
            .map(|&c| {
                (
                    c,
                    read_u64(root, &format!("{}/cpufreq/scaling_cur_freq", cpu_dir(c))),
                )
            })
            .collect(),
        ..Sample::default()
    };
    let th = "sys/class/thermal";
    for z in sorted_entries(&root.join(th), "thermal_zone") {
        if let Some(t) = read(root, &format!("{th}/{z}/temp")).and_then(|t| t.parse::<f64>().ok()) {
            let ty = read(root, &format!("{th}/{z}/type")).unwrap_or_else(|| z.clone());
            s.temps.push((format!("{z} {ty}"), t / 1000.0));
        }
    }
    for c in sorted_entries(&root.join(th), "cooling_device") {
        if let (Some(cur), Some(max)) = (
            read_u64(root, &format!("{th}/{c}/cur_state")),
            read_u64(root, &format!("{th}/{c}/max_state")),
        ) {
            let ty = read(root, &format!("{th}/{c}/type")).unwrap_or_else(|| c.clone());
            s.cooling.push((format!("{c} {ty}"), cur, max));
        }
    }
    let hw = "sys/class/hwmon";
    for h in sorted_entries(&root.join(hw), "hwmon") {
        let name = read(root, &format!("{hw}/{h}/name")).unwrap_or_else(|| h.clone());
        for i in 1..16 {
            if let Some(t) =
                read(root, &format!("{hw}/{h}/temp{i}_input")).and_then(|t| t.parse::<f64>().ok())
            {
                s.temps.push((format!("{h} {name} temp{i}"), t / 1000.0));
            }
        }
    }
    for &c in cpus {
        for (n, what) in [
            ("core_throttle_count", "core"),
            ("package_throttle_count", "package"),
        ] {
            if let Some(v) = read_u64(root, &format!("{}/thermal_throttle/{n}", cpu_dir(c))) {
                s.throttle.push((format!("cpu{c} {what}"), v));
            }
        }
    }
    if let Some(stat) = trimmed(proc::Root::under(root).read("stat")) {
        if let Some(t) = proc::cpu::total(&stat) {
            // user nice system idle iowait irq softirq steal (guest counted in user)
            s.total_ticks = t.total();
            s.steal_ticks = t.steal();
            s.busy_ticks = s.total_ticks - t.col(3) - t.col(4) - t.col(7);
        }
    }
    s.quota = quota(root);
    s
}

#[cfg(test)]
mod tests;
