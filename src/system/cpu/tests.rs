//! Tests of the CPU description, on fixture /proc and /sys trees.

use super::*;

use crate::system::test_support::{cgroup, put};

#[test]
fn big_little_clusters_from_policies_and_midr() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    put(r, "sys/devices/system/cpu/online", "0-5\n");
    let mut info = String::new();
    for c in 0..6 {
        let (part, pol, cap, max) = if c < 4 {
            ("0xd03", "policy0", "485", "1416000")
        } else {
            ("0xd08", "policy4", "1024", "1800000")
        };
        info.push_str(&format!(
            "processor\t: {c}\nCPU implementer\t: 0x41\nCPU part\t: {part}\n\n"
        ));
        let d = format!("sys/devices/system/cpu/cpu{c}");
        put(r, &format!("{d}/cpu_capacity"), cap);
        put(r, &format!("{d}/cpufreq/cpuinfo_max_freq"), max);
        put(r, &format!("{d}/cpufreq/scaling_governor"), "schedutil");
        let p = format!("sys/devices/system/cpu/cpufreq/{pol}");
        put(
            r,
            &format!("{p}/related_cpus"),
            if c < 4 { "0 1 2 3" } else { "4 5" },
        );
    }
    put(r, "proc/cpuinfo", &info);
    let cores = cores(r);
    assert_eq!(cores.len(), 6);
    assert_eq!(cores[0].core.as_deref(), Some("ARM Cortex-A53"));
    assert_eq!(cores[5].max_khz, Some(1_800_000));
    let cl = clusters(&cores);
    assert_eq!(cl.len(), 2);
    assert_eq!(cl[0].cpus, vec![0, 1, 2, 3]);
    assert_eq!(
        cl[1].describe(),
        "policy4: CPUs 4-5, ARM Cortex-A72, capacity 1024, max 1800 MHz"
    );
}

#[test]
fn opp_table_and_governor_are_facts() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let p = "sys/devices/system/cpu/cpufreq/policy0";
    put(r, &format!("{p}/related_cpus"), "0 1 2 3");
    put(r, &format!("{p}/scaling_governor"), "ondemand");
    put(r, &format!("{p}/cpuinfo_max_freq"), "1200000");
    put(r, &format!("{p}/scaling_max_freq"), "1000000");
    put(
        r,
        &format!("{p}/stats/time_in_state"),
        "600000 300\n1000000 100\n1200000 0\n",
    );
    let mut f = Facts::default();
    opp_facts(r, &mut f);
    let gov = f.get("cpu.policy0.governor").unwrap();
    assert!(gov.starts_with("CPUs 0 1 2 3: ondemand"), "{gov}");
    assert!(gov.contains("-1000 MHz (hardware ?-1200 MHz)"), "{gov}");
    assert_eq!(
        f.get("cpu.policy0.opp"),
        Some("600 (75%), 1000 (25%), 1200 (0%) MHz — share of time at each since boot")
    );
}

#[test]
fn quota_from_cgroup_v1_and_v2() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    cgroup(
        r,
        "5:cpu,cpuacct:/lab\n0::/\n",
        "30 20 0:26 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n",
    );
    let d = "sys/fs/cgroup/cpu,cpuacct/lab";
    put(r, &format!("{d}/cpu.cfs_quota_us"), "50000");
    put(r, &format!("{d}/cpu.cfs_period_us"), "100000");
    put(
        r,
        &format!("{d}/cpu.stat"),
        "nr_periods 10\nnr_throttled 4\nthrottled_time 12345\n",
    );
    let q = quota(r).unwrap();
    assert_eq!(q.cpus(), Some(0.5));
    assert_eq!((q.nr_throttled, q.throttled_ns), (4, 12345));

    cgroup(
        r,
        "0::/user.slice\n",
        "30 20 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
    );
    put(r, "sys/fs/cgroup/user.slice/cpu.max", "max 100000\n");
    put(
        r,
        "sys/fs/cgroup/user.slice/cpu.stat",
        "nr_throttled 0\nthrottled_usec 0\n",
    );
    assert_eq!(quota(r).unwrap().cpus(), None);
}
