use super::super::fixtures::{ev, get, workload};
use super::*;
use crate::model::diagnosis::{CpuHolder, Section};
use crate::model::profile::{FoldedStack, Profile, SymbolRow};

fn holder(comm: &str, pid: u32, s: f64, role: &str) -> CpuHolder {
    CpuHolder {
        comm: comm.into(),
        pid,
        s,
        role: role.into(),
    }
}

/// A single-threaded program on CPU 1.2 s, 0.6 s preempted, held by `holders`.
fn starved(threads: u32, holders: Vec<CpuHolder>) -> Diagnosis {
    let mut d = workload(1.2, 0.0, &[]);
    if let Section::Present { data, .. } = &mut d.workload {
        data.total.threads = threads;
        data.tunelab_cpu_s = 0.7;
    }
    if let Section::Present { data, .. } = &mut d.offcpu {
        data.runqueue_s = 0.6;
        data.holders = holders;
    }
    d
}

#[test]
fn tunelab_as_the_holder_is_an_observer_cost_not_starvation() {
    let d = starved(
        1,
        vec![
            holder("tunelab", 99, 0.55, "tunelab"),
            holder("kworker/0:1", 12, 0.05, "other"),
        ],
    );
    let f = get(cpu_starvation(&ev(d), Workload::General)).expect("a finding");
    assert_eq!(f.id, "diagnose.observer-cost", "{}", f.title);
    assert!(f.title.contains("tunelab itself"), "{}", f.title);
}

#[test]
fn another_process_as_the_holder_is_named() {
    let d = starved(
        1,
        vec![
            holder("make", 4242, 0.5, "other"),
            holder("tunelab", 99, 0.1, "tunelab"),
        ],
    );
    let f = get(cpu_starvation(&ev(d), Workload::General)).expect("a finding");
    assert_eq!(f.id, "diagnose.cpu-starvation");
    assert!(f.title.contains("make (pid 4242)"), "{}", f.title);
    assert!(f.title.contains("tunelab's own"), "{}", f.title);
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("make (pid 4242) 83.3%")),
        "{:?}",
        f.evidence
    );
}

#[test]
fn a_lost_record_never_blames_processes_that_used_no_cpu() {
    // Switch records were lost: 0.5 s of the wait landed on the kernel
    // thread switched in before tunelab's lost switch-in, but other
    // processes used no CPU (the machine's busy time is the workload's
    // 1.2 s of 2 CPUs × 2 s = 30%); tunelab used 0.7 s.
    let mut d = starved(
        1,
        vec![
            holder("rcu_sched", 14, 0.5, "other"),
            holder("tunelab", 99, 0.1, "tunelab"),
        ],
    );
    if let Section::Present { data, .. } = &mut d.resources {
        data.rows[0].utilisation[0].value = 30.0;
    }
    let f = get(cpu_starvation(&ev(d), Workload::General)).expect("a finding");
    assert_eq!(f.id, "diagnose.observer-cost", "{}", f.title);
    assert!(!f.title.contains("rcu_sched"), "{}", f.title);
}

#[test]
fn more_threads_than_cpus_is_still_starved_by_its_own_threads() {
    let d = starved(
        4,
        vec![
            holder("prog", 50, 0.5, "workload"),
            holder("tunelab", 99, 0.1, "tunelab"),
        ],
    );
    let f = get(cpu_starvation(&ev(d), Workload::General)).expect("a finding");
    assert_eq!(f.id, "diagnose.cpu-starvation");
    assert!(f.why.contains("4 threads on 2 CPUs"), "{}", f.why);
    assert!(!f.why.contains("other processes"), "{}", f.why);
}

#[test]
fn untraced_holders_with_idle_others_are_the_observer() {
    // No CPU-wide records: the machine was 35% busy of 2 CPUs over 2 s
    // = 1.4 s, the workload's 1.2 s of it; tunelab used 0.7 s.
    let mut d = starved(1, Vec::new());
    if let Section::Present { data, .. } = &mut d.resources {
        data.rows[0].utilisation[0].value = 35.0;
    }
    let f = get(cpu_starvation(&ev(d), Workload::General)).expect("a finding");
    assert_eq!(f.id, "diagnose.observer-cost", "{}", f.title);
}

fn profiled(symbols: &[(&str, &str, f64)], folded: &[(&str, u64)]) -> Diagnosis {
    let mut d = workload(
        0.9,
        0.0,
        &[("condvar", "futex: pthread_cond_wait", "consumer", 3.0)],
    );
    d.profile = Section::Present {
        data: Profile {
            samples: 1000,
            user_samples: 980,
            symbols: symbols
                .iter()
                .map(|(img, sym, pct)| SymbolRow {
                    samples: (*pct * 10.0) as u64,
                    percent: *pct,
                    image: img.to_string(),
                    symbol: sym.to_string(),
                })
                .collect(),
            folded: folded
                .iter()
                .map(|(s, n)| FoldedStack {
                    stack: s.to_string(),
                    samples: *n,
                })
                .collect(),
            ..Default::default()
        },
        overhead: Default::default(),
    };
    d
}

#[test]
fn a_busy_thread_beside_blocked_ones_has_its_hot_spot() {
    // 0.9 s of CPU over 2 s (45% of one CPU... of active time only 23%):
    // the producer's thread is busy while three consumers wait.
    let mut d = profiled(
        &[("prog", "produce", 97.0)],
        &[("prog;main;producer;produce", 970)],
    );
    if let Section::Present { data, .. } = &mut d.workload {
        data.total.user_s = 1.6;
    }
    let f = get(cpu_hotspot(&ev(d), Workload::General)).expect("a hot spot");
    assert!(f.title.contains("produce"), "{}", f.title);
}

#[test]
fn a_c_library_hot_spot_names_the_programs_caller() {
    let mut d = profiled(
        &[
            ("libc.so.6", "__strcmp_evex", 60.0),
            ("prog", "compare_keys", 20.0),
        ],
        &[
            ("prog;main;sort_all;compare_keys;__strcmp_evex", 600),
            ("prog;main;sort_all;compare_keys", 200),
        ],
    );
    if let Section::Present { data, .. } = &mut d.workload {
        data.total.user_s = 1.9;
    }
    let f = get(cpu_hotspot(&ev(d), Workload::General)).expect("a hot spot");
    assert!(f.title.contains("called from compare_keys"), "{}", f.title);
    assert!(
        f.command
            .starts_with("make compare_keys call __strcmp_evex"),
        "{}",
        f.command
    );
}

#[test]
fn bare_addresses_get_a_note_on_why_and_how_to_get_names() {
    let mut d = profiled(&[("prog", "0x4011a6", 80.0)], &[("prog;0x4011a6", 800)]);
    if let Section::Present { data, .. } = &mut d.workload {
        data.total.user_s = 1.9;
    }
    let f = get(cpu_hotspot(&ev(d), Workload::General)).expect("a hot spot");
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("stripped") && e.contains("cc -g")),
        "{:?}",
        f.evidence
    );
}

#[test]
fn verify_commands_paste_back_into_a_shell() {
    let mut d = starved(1, vec![holder("make", 4242, 0.6, "other")]);
    d.target.command = vec!["sh".into(), "-c".into(), "grep -c x f | sort".into()];
    let f = get(cpu_starvation(&ev(d), Workload::General)).expect("a finding");
    assert!(
        f.verify.contains("-- sh -c 'grep -c x f | sort'"),
        "{}",
        f.verify
    );
}
