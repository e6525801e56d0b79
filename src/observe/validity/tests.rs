//! Tests of the validity guard, run on fixture /proc and /sys trees.

use super::cpu_time::{parse_cpu_line, proc_ticks};
use super::swap::parse_swap;
use super::*;

struct Tree(tempfile::TempDir);

impl Tree {
    fn new() -> Tree {
        Tree(tempfile::tempdir().unwrap())
    }
    fn put(&self, rel: &str, text: &str) -> &Self {
        let p = self.0.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }
    /// A guard on this tree with its own cache-drop counter.
    fn guard(&self, scratch: Option<&Path>) -> Guard {
        Guard::new(self.roots(), scratch, CacheDrops::default())
    }
    fn roots(&self) -> Roots {
        Roots {
            proc_: crate::system::proc::Root::under(self.0.path()),
            sys: self.0.path().join("sys"),
            pid: 100,
            ticks_per_second: 100,
        }
    }
}

fn stat_line(pid: u32, utime: u64, stime: u64, cutime: u64, cstime: u64) -> String {
    format!(
        "{pid} (my prog) S 1 {pid} {pid} 0 -1 4194304 0 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0 1 0 0\n"
    )
}

fn proc_stat(user: u64, system: u64, idle: u64, steal: u64) -> String {
    format!("cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
}

/// A minimal board: /proc without children files, no cpufreq, no thermal.
#[test]
fn missing_sources_are_skipped_with_reasons() {
    let t = Tree::new();
    t.put("proc/stat", &proc_stat(100, 50, 1000, 0))
        .put("proc/vmstat", "nr_free_pages 10\n")
        .put("proc/100/stat", &stat_line(100, 1, 1, 0, 0))
        .put("sys/devices/system/cpu/cpu0/online", "1");
    let g = t.guard(None);
    let text = g.skipped.join("\n");
    assert!(text.contains("CPU clock: no cpufreq"), "{text}");
    assert!(text.contains("thermal: no readable"), "{text}");
    assert!(text.contains("throttle counters"), "{text}");
    assert!(text.contains("CONFIG_PROC_CHILDREN"), "{text}");
    assert!(text.contains("disk I/O: no whole disk"), "{text}");
    let r = g.read();
    let c = g.check(&r, &g.read(), 1.0);
    assert!(c.flags.is_empty(), "{:?}", c.flags);
    assert_eq!(c.other_cpu_pct, None);
    assert_eq!(c.swap_pages, None, "no pswpin line: no swap figure");
    assert_eq!(c.freq_mhz_min, None);
}

#[test]
fn other_processes_are_what_our_tree_did_not_use() {
    let t = Tree::new();
    t.put("proc/stat", &proc_stat(1000, 100, 5000, 0))
        .put("proc/vmstat", "pswpin 0\npswpout 0\n")
        .put("proc/100/stat", &stat_line(100, 10, 5, 0, 0))
        .put("proc/100/task/100/children", "200 ")
        .put("proc/100/task/101/children", "")
        .put("proc/200/stat", &stat_line(200, 3, 1, 0, 0))
        .put("proc/200/task/200/children", "");
    let g = t.guard(None);
    assert!(g.skipped.iter().all(|s| !s.contains("CHILDREN")));
    let before = g.read();
    // One second later: the machine did 150 busy ticks; we did 60, our
    // child (reaped meanwhile: now in our cutime) 40 → others 50 ticks
    // = 50% of a CPU.
    t.put("proc/stat", &proc_stat(1120, 130, 5050, 0))
        .put("proc/100/stat", &stat_line(100, 50, 25, 44, 0))
        .put("proc/100/task/100/children", "");
    let after = g.read();
    let c = g.check(&before, &after, 1.0);
    assert_eq!(c.other_cpu_pct.map(|p| p.round()), Some(50.0));
    assert_eq!(c.flags.len(), 1, "{:?}", c.flags);
    assert_eq!(c.flags[0].kind, "load");
    // Without the child's share, the others would have been blamed for it.
    t.put("proc/stat", &proc_stat(1010, 110, 6000, 0));
    let quiet = g.check(&before, &g.read(), 1.0);
    assert!(quiet.flags.is_empty(), "{:?}", quiet.flags);
}

fn diskstats(vda_read: u64, vda_written: u64, loop_written: u64) -> String {
    // major minor name reads merged SECTORS_READ ms writes merged SECTORS_WRITTEN ...
    format!(
        " 253 0 vda 100 0 {vda_read} 50 200 0 {vda_written} 80 0 100 130 0 0 0 0\n\
         253 1 vda1 90 0 {vda_read} 40 190 0 {vda_written} 70 0 90 110 0 0 0 0\n\
         7 0 loop0 10 0 0 1 20 0 {loop_written} 2 0 3 3 0 0 0 0\n"
    )
}

fn io(read: u64, write: u64, cancelled: u64) -> String {
    format!(
        "rchar: 1\nwchar: 1\nsyscr: 1\nsyscw: 1\nread_bytes: {read}\nwrite_bytes: {write}\n\
         cancelled_write_bytes: {cancelled}\n"
    )
}

/// A machine whose disk moved 40 MiB in a 2 s trial of which our tree
/// (we, and a live child) did 10 MiB: the other 30 MiB are flagged.
#[test]
fn other_processes_disk_io_is_flagged() {
    let t = Tree::new();
    t.put("proc/stat", &proc_stat(100, 0, 1000, 0))
        .put("proc/diskstats", &diskstats(1000, 2000, 0))
        .put("sys/block/vda/device/vendor", "0x1af4")
        .put("sys/block/loop0/size", "0")
        .put("proc/100/stat", &stat_line(100, 1, 1, 0, 0))
        .put("proc/100/io", &io(0, 4096, 0))
        .put("proc/100/task/100/children", "200")
        .put("proc/200/stat", &stat_line(200, 1, 1, 0, 0))
        .put("proc/200/io", &io(0, 0, 0))
        .put("proc/200/task/200/children", "");
    let g = t.guard(None);
    assert!(
        g.skipped.iter().all(|s| !s.contains("disk I/O")),
        "{:?}",
        g.skipped
    );
    assert_eq!(
        g.disks,
        ["vda"],
        "partitions and loop devices are not watched"
    );
    let before = g.read();
    let mib_sectors = 2048;
    // vda: +15 MiB read, +25 MiB written (its partition and a loop
    // device moved too: not counted again). We wrote 6 MiB, cancelled
    // 1 MiB of it; our child read 5 MiB.
    t.put(
        "proc/diskstats",
        &diskstats(1000 + 15 * mib_sectors, 2000 + 25 * mib_sectors, 999_999),
    )
    .put("proc/100/io", &io(0, 4096 + (6 << 20), 1 << 20))
    .put("proc/200/io", &io(5 << 20, 0, 0));
    let c = g.check(&before, &g.read(), 2.0);
    assert_eq!(c.other_io_bytes, Some(30 << 20));
    let kinds: Vec<&str> = c.flags.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["disk-io"], "{:?}", c.flags);
    assert!(c.flags[0].detail.contains("30.0 MiB"), "{:?}", c.flags);
    // The same 30 MiB over 60 s is 0.5 MiB/s: under the threshold.
    let slow = g.check(&before, &g.read(), 60.0);
    assert!(slow.flags.is_empty(), "{:?}", slow.flags);
    // Only our own I/O: nothing to flag.
    t.put(
        "proc/diskstats",
        &diskstats(1000, 2000 + 5 * mib_sectors, 0),
    )
    .put("proc/100/io", &io(0, 4096 + (5 << 20), 0))
    .put("proc/200/io", &io(0, 0, 0));
    let own = g.check(&before, &g.read(), 1.0);
    assert_eq!(own.other_io_bytes, Some(0));
    assert!(own.flags.is_empty(), "{:?}", own.flags);
}

#[test]
fn disk_io_without_io_accounting_is_skipped() {
    let t = Tree::new();
    t.put("proc/diskstats", &diskstats(0, 0, 0))
        .put("sys/block/vda/device/vendor", "x")
        .put("proc/100/stat", &stat_line(100, 1, 1, 0, 0));
    let g = t.guard(None);
    assert!(
        g.skipped
            .iter()
            .any(|s| s.contains("CONFIG_TASK_IO_ACCOUNTING")),
        "{:?}",
        g.skipped
    );
    let c = g.check(&g.read(), &g.read(), 1.0);
    assert_eq!(c.other_io_bytes, None);
}

#[test]
fn steal_and_swap_are_flagged() {
    let t = Tree::new();
    t.put("proc/stat", &proc_stat(100, 0, 1000, 0))
        .put("proc/vmstat", "pswpin 10\npswpout 5\n");
    let g = t.guard(None);
    let before = g.read();
    t.put("proc/stat", &proc_stat(150, 0, 1100, 20))
        .put("proc/vmstat", "pswpin 12\npswpout 9\n");
    let c = g.check(&before, &g.read(), 1.0);
    let kinds: Vec<&str> = c.flags.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["steal", "swap"]);
    assert_eq!(c.swap_pages, Some(6));
    assert!((c.steal_pct.unwrap() - 20.0 / 170.0 * 100.0).abs() < 1e-9);
}

fn board_with_cpufreq(t: &Tree, governor: &str) {
    for cpu in 0..2 {
        let d = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        t.put(&format!("{d}/scaling_cur_freq"), "1200000")
            .put(&format!("{d}/scaling_max_freq"), "1200000")
            .put(&format!("{d}/scaling_governor"), governor);
    }
    t.put("sys/class/thermal/thermal_zone0/type", "cpu-thermal")
        .put("sys/class/thermal/thermal_zone0/temp", "61000")
        .put(
            "sys/class/thermal/thermal_zone0/trip_point_0_type",
            "active",
        )
        .put("sys/class/thermal/thermal_zone0/trip_point_0_temp", "50000")
        .put(
            "sys/class/thermal/thermal_zone0/trip_point_1_type",
            "passive",
        )
        .put("sys/class/thermal/thermal_zone0/trip_point_1_temp", "80000")
        .put(
            "sys/class/thermal/cooling_device0/type",
            "thermal-cpufreq-0",
        )
        .put("sys/class/thermal/cooling_device0/cur_state", "0")
        .put("sys/class/thermal/cooling_device0/max_state", "4")
        .put("sys/class/thermal/cooling_device1/type", "Fan")
        .put("sys/class/thermal/cooling_device1/cur_state", "3");
}

#[test]
fn a_board_heating_up_is_flagged() {
    let t = Tree::new();
    board_with_cpufreq(&t, "schedutil");
    let g = t.guard(None);
    assert!(
        !g.skipped.iter().any(|s| s.contains("thermal:")),
        "{:?}",
        g.skipped
    );
    let before = g.read();
    // Cool and quiet: the active (fan) trip and a running fan do not flag.
    let c = g.check(&before, &g.read(), 1.0);
    assert!(c.flags.is_empty(), "{:?}", c.flags);
    assert_eq!(c.temp_c_max, Some(61.0));
    assert_eq!(c.freq_mhz_max, Some(1200.0));
    // Hot: passive trip reached, cpufreq cooling engaged, limit lowered,
    // clock down (a dynamic governor: only recorded, not a clock flag).
    t.put("sys/class/thermal/thermal_zone0/temp", "81500")
        .put("sys/class/thermal/cooling_device0/cur_state", "2")
        .put(
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_max_freq",
            "800000",
        )
        .put(
            "sys/devices/system/cpu/cpu1/cpufreq/scaling_cur_freq",
            "800000",
        );
    let c = g.check(&before, &g.read(), 1.0);
    let kinds: Vec<&str> = c.flags.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["throttle", "thermal", "thermal"], "{:?}", c.flags);
    assert!(
        c.flags[1].detail.contains("cpu-thermal at 81.5 °C"),
        "{:?}",
        c.flags
    );
    assert_eq!(
        (c.freq_mhz_min, c.freq_mhz_max),
        (Some(800.0), Some(1200.0))
    );
}

#[test]
fn a_fixed_governor_clock_change_is_flagged() {
    let t = Tree::new();
    board_with_cpufreq(&t, "performance");
    let g = t.guard(None);
    let before = g.read();
    t.put(
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
        "1000000",
    );
    let c = g.check(&before, &g.read(), 1.0);
    assert_eq!(c.flags.len(), 1, "{:?}", c.flags);
    assert_eq!(c.flags[0].kind, "clock");
    // 5% is within normal reporting jitter.
    t.put(
        "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
        "1140000",
    );
    assert!(g.check(&before, &g.read(), 1.0).flags.is_empty());
}

#[test]
fn throttle_counters_and_cache_drops() {
    let t = Tree::new();
    t.put(
        "sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count",
        "3",
    )
    .put(
        "sys/devices/system/cpu/cpu0/thermal_throttle/package_throttle_count",
        "1",
    );
    let drops = CacheDrops::default();
    let g = Guard::new(t.roots(), None, drops.clone());
    let before = g.read();
    t.put(
        "sys/devices/system/cpu/cpu0/thermal_throttle/package_throttle_count",
        "4",
    );
    drops.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let c = g.check(&before, &g.read(), 1.0);
    let kinds: Vec<&str> = c.flags.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["throttle", "cache-drop"], "{:?}", c.flags);
    assert!(c.flags[0].detail.contains("3 times"));
}

#[test]
fn scratch_space_is_watched() {
    let t = Tree::new();
    let g = t.guard(Some(t.0.path()));
    let r = g.read();
    let c = g.check(&r, &r, 1.0);
    // A real file system with room to spare: measured, not flagged.
    assert!(c.scratch_free.unwrap() > 0);
    assert!(!c.flags.iter().any(|f| f.kind == "scratch-full"));
    let mut full = r.clone();
    full.scratch = Some((4096, 1 << 30));
    let c = g.check(&r, &full, 1.0);
    assert_eq!(c.flags[0].kind, "scratch-full");
}

#[test]
fn suspect_summary_counts_kept_trials_only() {
    let load = |d: &str| TrialCheck {
        flags: vec![Flag {
            kind: "load".into(),
            detail: d.into(),
        }],
        ..Default::default()
    };
    let mut v = Validity {
        warmup_discarded: 1,
        trials: vec![load("discarded one"), TrialCheck::default(), load("x 40%")],
        ..Default::default()
    };
    assert_eq!(v.suspect_summary().unwrap(), "1 of 2 trials flagged: x 40%");
    v.trials[1] = load("x 20%");
    assert_eq!(
        v.suspect_summary().unwrap(),
        "2 of 2 trials flagged: load in 2 (e.g. x 20%)"
    );
    v.trials = vec![load("only discarded"), TrialCheck::default()];
    assert_eq!(v.suspect_summary(), None);
    let old: Validity = serde_json::from_str("{}").unwrap();
    assert!(old.is_empty());
}

#[test]
fn parsers() {
    assert_eq!(
        parse_cpu_line("cpu  10 2 3 100 5 1 1 7 4 0\n"),
        Some((15, 7, 129))
    );
    assert_eq!(parse_swap("pswpin 3\npswpout 4\n"), Some(7));
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("7")).unwrap();
    std::fs::write(
        d.path().join("7/stat"),
        "7 (a) b) c) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
    )
    .unwrap();
    // utime..cstime = fields 14..17 = 11 12 13 14 here.
    assert_eq!(
        proc_ticks(&crate::system::proc::Root::at(d.path()), 7),
        Some(11 + 12 + 13 + 14)
    );
}

/// The guard reads twice per trial: on this machine's real /proc and
/// /sys a reading must stay far below a trial's ~100 ms minimum.
#[test]
fn reading_the_real_system_is_cheap() {
    let dir = tempfile::tempdir().unwrap();
    let g = Guard::new(Roots::system(), Some(dir.path()), CacheDrops::default());
    let mut us: Vec<f64> = (0..50)
        .map(|_| {
            let t = std::time::Instant::now();
            std::hint::black_box(g.read());
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    us.sort_by(f64::total_cmp);
    let median = us[us.len() / 2];
    eprintln!(
        "guard reading: median {median:.0} µs, max {:.0} µs",
        us[us.len() - 1]
    );
    assert!(median < 5000.0, "a guard reading took {median:.0} µs");
}
