use super::*;

#[test]
fn auto_size_fits_boards_and_hosts() {
    const MIB: u64 = 1 << 20;
    // 64 MB board with 1 GB of free flash: 2 × RAM.
    assert_eq!(auto_size(64 * MIB, 1000 * MIB).0, 128 * MIB);
    // 16 MB board: at least 32 MiB.
    assert_eq!(auto_size(16 * MIB, 1000 * MIB).0, 32 * MIB);
    // Big host: capped at 1 GiB.
    assert_eq!(auto_size(24 << 30, 50 << 30).0, 1 << 30);
    // Little free space: half of it, whole MiB.
    let (s, why) = auto_size(256 * MIB, 101 * MIB);
    assert_eq!(s, 50 * MIB);
    assert!(why.contains("half the free space"), "{why}");
    // Below the 32 MiB floor because of space: not quoted as "within" it.
    let (s, why) = auto_size(64 * MIB, 47 * MIB);
    assert_eq!(s, 23 * MIB);
    assert!(
        why.starts_with("size=auto: 23 MiB = half the free space"),
        "{why}"
    );
    assert!(!why.contains("23 MiB = 2 × MemTotal"), "{why}");
}

#[test]
fn ops_are_aligned_in_range_and_mixed_as_asked() {
    use rand::SeedableRng;
    let f = tempfile::tempfile().unwrap();
    let job = Job {
        file: &f,
        path: Path::new("x"),
        bs: 4096,
        blocks: 10,
        read_pct: 70,
    };
    let mut rng = SmallRng::seed_from_u64(3);
    let mut reads = 0;
    for _ in 0..10_000 {
        let (off, r) = job.next_op(&mut rng);
        assert_eq!(off % 4096, 0);
        assert!(off < 10 * 4096);
        reads += r as u32;
    }
    assert!((6700..7300).contains(&reads), "{reads}");
    let all_reads = Job {
        read_pct: 100,
        ..job
    };
    assert!((0..100).all(|_| all_reads.next_op(&mut rng).1));
}

/// ramfs refuses O_DIRECT on every kernel (root: it mounts one).
#[test]
fn direct_open_falls_back_to_buffered_on_ramfs() {
    if !crate::safety::is_root() {
        eprintln!("SKIPPED: mounting a ramfs needs root");
        return;
    }
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "ramfs", "ramfs"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED: cannot mount a ramfs");
        return;
    }
    let path = dir.path().join("f");
    std::fs::write(&path, vec![1u8; 8192]).unwrap();
    let got = open(&path, true);
    let buffered = open(&path, false);
    let _ = std::process::Command::new("umount")
        .arg(dir.path())
        .status();
    let (_, direct, notes) = got.unwrap();
    assert!(!direct);
    let notes = notes.join("\n");
    assert!(
        notes.contains("mode=direct fell back to BUFFERED: ramfs"),
        "{notes}"
    );
    assert!(
        notes.contains("the target is ramfs: the file lives in memory"),
        "{notes}"
    );
    let (_, direct, notes) = buffered.unwrap();
    assert!(!direct);
    assert!(!notes.join(" ").contains("fell back"));
}

#[test]
fn a_skipped_point_has_no_metrics_and_says_why() {
    let ctx = Ctx::new(None, PathBuf::from("/"), None);
    let mut s = Skipped("skipped: engine=io_uring is not available here (test)".into());
    assert!(s.trial(&ctx).unwrap().0.is_empty());
    let ex = s.finish(&ctx).unwrap();
    assert!(ex.notes[0].contains("io_uring is not available"));
}

#[test]
fn cpu_per_op_divides_the_trial_cpu_by_its_operations_and_adds_up() {
    let mut a = Tally {
        ops: 4,
        cpu_ns: 2_000,
        ..Default::default()
    };
    assert!((a.cpu_per_op() - 500e-9).abs() < 1e-15);
    a.add(&Tally {
        ops: 6,
        cpu_ns: 1_000,
        ..Default::default()
    });
    assert_eq!((a.ops, a.cpu_ns), (10, 3_000));
    assert!((a.cpu_per_op() - 300e-9).abs() < 1e-15);
    // No operation: no division by zero.
    assert_eq!(Tally::default().cpu_per_op(), 0.0);
}
