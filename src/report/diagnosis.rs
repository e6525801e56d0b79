//! A stored diagnosis (`Run::diagnosis`) as text for `show` and as report
//! sections for `report --html`/Markdown. One description of each section
//! (`parts`) feeds both. The flame graph is drawn by a function the caller
//! passes in (the CLI hands in the profiler's renderer): report never
//! reaches up into diagnose/.

use super::document::{Block, Cell, Figure as DocFigure, Section as DocSection, Table};
use crate::model::diagnosis::{Diagnosis, Figure, Overhead, Section};
use crate::model::profile::{FoldedStack, Profile};
use crate::units::{human, seconds, si, sig};

/// Draws folded stacks as an SVG flame graph (title) or says why not.
pub type Flame<'a> = &'a dyn Fn(&[FoldedStack], &str) -> Result<String, String>;

/// Rows shown per table.
const ROWS: usize = 12;

/// One section, format-neutral.
pub struct Part {
    pub id: &'static str,
    pub title: String,
    pub text: Vec<String>,
    pub tables: Vec<(Vec<String>, Vec<Vec<String>>)>,
    /// Folded stacks for a flame graph, with its title.
    pub flame: Option<(Vec<FoldedStack>, String)>,
    pub notes: Vec<String>,
}

impl Part {
    fn new(id: &'static str, title: &str) -> Part {
        Part {
            id,
            title: title.into(),
            text: Vec::new(),
            tables: Vec::new(),
            flame: None,
            notes: Vec::new(),
        }
    }

    fn table(&mut self, header: &[&str], rows: Vec<Vec<String>>) {
        if !rows.is_empty() {
            self.tables
                .push((header.iter().map(|s| s.to_string()).collect(), rows));
        }
    }
}

/// A figure with its unit, for a person.
pub fn figure(f: &Figure) -> String {
    match f.unit.as_str() {
        "%" => format!("{}%", sig(f.value)),
        "B/s" => human(f.value, "B/s"),
        "s" => seconds(f.value),
        "/s" => format!("{}/s", si(f.value)),
        "count" => si(f.value),
        u => format!("{} {u}", sig(f.value)),
    }
}

fn figures(v: &[Figure]) -> String {
    v.iter()
        .map(|f| format!("{} {}", f.name, figure(f)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "1234 sshd", or "tunelab ×400 (from pid 1234)" for summed workers.
fn who(pid: i32, comm: &str, processes: u32) -> String {
    if processes > 1 {
        format!("{comm} ×{processes} (from pid {pid})")
    } else {
        format!("{pid} {comm}")
    }
}

fn overhead_line(o: &Overhead) -> String {
    format!("overhead: {}", o.words)
}

/// Present data with the overhead noted, or the skip reason as the only text.
fn present<'a, T>(p: &mut Part, s: &'a Section<T>) -> Option<&'a T> {
    match s {
        Section::Present { data, overhead } => {
            // A section that states no cost of its own prints no empty line.
            if !overhead.words.trim().is_empty() {
                p.notes.push(overhead_line(overhead));
            }
            Some(data)
        }
        Section::Skipped { reason } => {
            p.text.push(format!("skipped: {reason}"));
            None
        }
    }
}

fn profile_part(id: &'static str, title: &str, s: &Section<Profile>) -> Part {
    let mut p = Part::new(id, title);
    if let Some(pr) = present(&mut p, s) {
        p.text.push(format!(
            "event {}{}: {} samples ({} user, {} kernel) at {} Hz{}",
            pr.event,
            if pr.event_reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", pr.event_reason)
            },
            pr.samples,
            pr.user_samples,
            pr.kernel_samples,
            pr.frequency_hz,
            if pr.lost > 0 {
                format!(", {} lost (bursts under-counted)", pr.lost)
            } else {
                String::new()
            }
        ));
        p.table(
            &["samples", "%", "image", "symbol"],
            pr.symbols
                .iter()
                .take(ROWS * 2)
                .map(|r| {
                    vec![
                        r.samples.to_string(),
                        format!("{:.1}", r.percent),
                        r.image.clone(),
                        r.symbol.clone(),
                    ]
                })
                .collect(),
        );
        p.table(
            &["symbol", "self", "total", "callers", "callees"],
            pr.callgraph
                .iter()
                .take(ROWS)
                .map(|c| {
                    let edges = |v: &[crate::model::profile::CallEdge]| {
                        v.iter()
                            .take(3)
                            .map(|e| format!("{} ({})", e.symbol, e.samples))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    vec![
                        c.symbol.clone(),
                        c.self_samples.to_string(),
                        c.total_samples.to_string(),
                        edges(&c.callers),
                        edges(&c.callees),
                    ]
                })
                .collect(),
        );
        if !pr.folded.is_empty() {
            p.flame = Some((pr.folded.clone(), format!("{title}: flame graph")));
        }
    }
    p
}

/// The workload's own figures, beside the machine-wide USE table.
fn workload_part(d: &Diagnosis) -> Part {
    let mut p = Part::new("diag-workload", "The workload's own figures");
    if let Some(w) = present(&mut p, &d.workload) {
        let i = d.interval_s.max(1e-9);
        let row = |f: &crate::model::diagnosis::TaskFigures, name: String| {
            let calls = f.syscr + f.syscw;
            vec![
                name,
                f.threads.to_string(),
                seconds(f.user_s),
                seconds(f.system_s),
                seconds(f.runqueue_s),
                format!(
                    "{}/s / {}/s",
                    si(f.voluntary_switches as f64 / i),
                    si(f.involuntary_switches as f64 / i)
                ),
                format!(
                    "{}/s / {}/s",
                    si(f.minor_faults as f64 / i),
                    si(f.major_faults as f64 / i)
                ),
                format!(
                    "{}/s, {} per call",
                    si(calls as f64 / i),
                    human((f.rchar + f.wchar) as f64 / calls.max(1) as f64, "B")
                ),
                format!(
                    "{} / {}",
                    human(f.read_bytes as f64, "B"),
                    human(f.write_bytes as f64, "B")
                ),
            ]
        };
        let mut rows: Vec<Vec<String>> = w
            .rows
            .iter()
            .take(ROWS)
            .map(|f| row(f, who(f.pid, &f.comm, f.processes)))
            .collect();
        if w.rows.len() > 1 || rows.is_empty() {
            rows.push(row(&w.total, "all of it".into()));
        }
        let cpu = w.total.cpu_s();
        p.text.push(format!(
            "{} of CPU over {} ({}% of one CPU), {}% of it in the kernel; {} waiting for a CPU",
            seconds(cpu),
            seconds(d.interval_s),
            sig(cpu / i * 100.0),
            sig(w.total.system_s / cpu.max(1e-9) * 100.0),
            seconds(w.total.runqueue_s)
        ));
        p.table(
            &[
                "process",
                "threads",
                "user",
                "system",
                "run-queue wait",
                "switches vol/invol",
                "faults minor/major",
                "read/write calls",
                "storage read/written",
            ],
            rows,
        );
        p.text.push(format!(
            "tunelab's own CPU time over the interval (samplers, profiler, tracer; not in any figure): {} ({}% of one CPU)",
            seconds(w.tunelab_cpu_s),
            sig(w.tunelab_cpu_s / i * 100.0)
        ));
        p.notes.push(format!("method: {}", w.method));
    }
    p
}

/// Time blocked by cause, with the off-CPU flame graph.
fn offcpu_part(d: &Diagnosis) -> Part {
    let mut p = Part::new("diag-offcpu", "Off-CPU: where the workload waits");
    if let Some(o) = present(&mut p, &d.offcpu) {
        p.text.push(format!(
            "{} blocked, {} preempted while runnable (source: {})",
            seconds(o.blocked_s),
            seconds(o.runqueue_s),
            o.source
        ));
        if o.causes.is_empty() {
            p.text.push("no task of the workload blocked".into());
        }
        p.table(
            &[
                "process",
                "cause",
                "called from",
                "waits",
                "mean",
                "longest",
                "total",
                "%",
            ],
            o.causes
                .iter()
                .take(ROWS)
                .map(|c| {
                    vec![
                        c.comm.clone(),
                        c.cause.clone(),
                        c.caller.clone(),
                        c.waits.to_string(),
                        seconds(c.total_s / c.waits.max(1) as f64),
                        seconds(c.max_s),
                        seconds(c.total_s),
                        format!("{:.1}", c.total_s / o.blocked_s.max(1e-12) * 100.0),
                    ]
                })
                .collect(),
        );
        p.table(
            &["cause", "heaviest kernel path"],
            o.causes
                .iter()
                .take(ROWS)
                .filter(|c| !c.kernel_path.is_empty())
                .map(|c| vec![c.cause.clone(), c.kernel_path.clone()])
                .collect(),
        );
        if !o.folded.is_empty() {
            p.flame = Some((
                o.folded.clone(),
                "Off-CPU flame graph (width: µs blocked)".into(),
            ));
        }
        p.notes.push(format!("method: {}", o.method));
    }
    p
}

/// A finding as the report shows it (the CLI converts advise's findings:
/// report does not reach up into advise/).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FindingText {
    pub severity: String,
    pub id: String,
    pub title: String,
    pub evidence: Vec<String>,
    pub why: String,
    pub fix: String,
    pub verify: String,
}

/// The findings as a report section (first, before the sections).
pub fn findings_section(findings: &[FindingText]) -> DocSection {
    let mut blocks = Vec::new();
    if findings.is_empty() {
        blocks.push(Block::Text(
            "no finding: nothing in this diagnosis crosses a rule's threshold".into(),
        ));
    } else {
        blocks.push(Block::Table(Table {
            header: vec!["severity".into(), "finding".into(), "fix".into()],
            rows: findings
                .iter()
                .map(|f| {
                    vec![
                        Cell::from(f.severity.clone()),
                        Cell::from(f.title.clone()),
                        Cell::from(f.fix.clone()),
                    ]
                })
                .collect(),
        }));
        for f in findings {
            let mut notes = vec![format!("{} [{}] {}", f.id, f.severity, f.title)];
            notes.extend(f.evidence.iter().map(|e| format!("evidence: {e}")));
            notes.push(format!("why: {}", f.why));
            notes.push(format!("fix: {}", f.fix));
            notes.push(format!("verify: {}", f.verify));
            blocks.push(Block::Notes(notes));
        }
    }
    DocSection {
        id: "diag-findings".into(),
        title: "Findings".into(),
        blocks,
    }
}

/// Every section of a diagnosis, in the order.
pub fn parts(d: &Diagnosis) -> Vec<Part> {
    let mut out = Vec::new();

    let mut head = Part::new("diagnosis", "Diagnosis");
    let t = &d.target;
    head.text.push(match t.kind.as_str() {
        "command" => format!(
            "`{}` (pid {}) from exec to exit: {}{}",
            t.command.join(" "),
            t.pid.map(|p| p.to_string()).unwrap_or_default(),
            seconds(d.interval_s),
            t.exit
                .as_ref()
                .map(|e| format!(", ended with {e}"))
                .unwrap_or_default()
        ),
        "pid" => format!(
            "pid {} ({}) and its descendants for {}",
            t.pid.unwrap_or(0),
            t.name,
            seconds(d.interval_s)
        ),
        _ => format!(
            "the whole machine ({} CPUs) for {}",
            d.cpus,
            seconds(d.interval_s)
        ),
    });
    out.push(head);

    out.push(workload_part(d));
    out.push(offcpu_part(d));

    let mut p = Part::new(
        "diag-use",
        "Resources, machine-wide (USE: utilisation, saturation, errors)",
    );
    if let Some(u) = present(&mut p, &d.resources) {
        for s in &u.standouts {
            p.text.push(format!("stands out: {s}"));
        }
        p.table(
            &["resource", "utilisation", "saturation", "errors"],
            u.rows
                .iter()
                .map(|r| {
                    vec![
                        format!("{} {}", r.kind, r.name),
                        figures(&r.utilisation),
                        figures(&r.saturation),
                        if r.errors.is_empty() {
                            "not exposed".into()
                        } else {
                            figures(&r.errors)
                        },
                    ]
                })
                .collect(),
        );
        p.notes.push(format!("method: {}", u.method));
    }
    out.push(p);

    out.push(profile_part("diag-profile", "CPU profile", &d.profile));

    let mut p = Part::new("diag-counters", "Counters");
    if let Some(c) = present(&mut p, &d.counters) {
        p.table(
            &["counter", "value", "on PMU", "note"],
            c.counters
                .iter()
                .map(|k| {
                    vec![
                        k.name.clone(),
                        match (k.value, k.unit.as_str()) {
                            (None, _) => "–".into(),
                            // task-clock and cpu-clock count nanoseconds.
                            (Some(v), "ns") => seconds(v / 1e9),
                            (Some(v), _) => si(v),
                        },
                        format!("{:.0}%", k.running_fraction * 100.0),
                        k.unavailable.clone(),
                    ]
                })
                .collect(),
        );
        if let Some(ipc) = c.ipc {
            p.text.push(format!("IPC {}", sig(ipc)));
        }
    }
    out.push(p);

    out.push(profile_part(
        "diag-cache",
        "Cache-miss profile",
        &d.cache_profile,
    ));

    let mut p = Part::new("diag-locks", "Lock contention (lock_stat)");
    if let Some(l) = present(&mut p, &d.locks) {
        if l.locks.is_empty() {
            p.text.push("no lock was contended".into());
        }
        p.table(
            &[
                "lock class",
                "contentions",
                "acquisitions",
                "wait max",
                "wait total",
                "hold total",
                "where it waited",
            ],
            l.locks
                .iter()
                .take(ROWS)
                .map(|r| {
                    vec![
                        r.class.clone(),
                        r.contentions.to_string(),
                        r.acquisitions.to_string(),
                        seconds(r.wait_max_us * 1e-6),
                        seconds(r.wait_total_us * 1e-6),
                        seconds(r.hold_total_us * 1e-6),
                        r.contention_points
                            .iter()
                            .take(2)
                            .map(|(n, s)| format!("{s} ({n})"))
                            .collect::<Vec<_>>()
                            .join(", "),
                    ]
                })
                .collect(),
        );
        p.notes.push(format!("method: {}", l.method));
    }
    out.push(p);

    let mut p = Part::new("diag-blocking", "Why tasks block (off-CPU)");
    if let Some(b) = present(&mut p, &d.blocking) {
        if b.causes.is_empty() {
            p.text.push("no task was seen blocked".into());
        }
        p.table(
            &["process", "cause", "times", "max", "total"],
            b.causes
                .iter()
                .take(ROWS)
                .map(|c| {
                    vec![
                        who(c.pid, &c.comm, c.processes),
                        c.cause.clone(),
                        c.count.to_string(),
                        seconds(c.max_s),
                        seconds(c.total_s),
                    ]
                })
                .collect(),
        );
        p.table(
            &["process", "tasks", "on CPU", "waiting for a CPU"],
            b.sched
                .iter()
                .take(ROWS)
                .map(|s| {
                    vec![
                        who(s.pid, &s.comm, s.processes),
                        s.tasks.to_string(),
                        seconds(s.run_s),
                        seconds(s.runqueue_s),
                    ]
                })
                .collect(),
        );
        p.notes.push(format!("method: {}", b.method));
    }
    out.push(p);

    let mut p = Part::new("diag-slab", "Slab churn");
    if let Some(s) = present(&mut p, &d.slab) {
        if s.caches.is_empty() {
            p.text.push("no slab cache changed".into());
        }
        p.table(
            &[
                "cache",
                "obj size",
                "objects",
                "allocs",
                "frees",
                "%fast alloc",
                "%fast free",
                "churn",
            ],
            s.caches
                .iter()
                .take(ROWS)
                .map(|c| {
                    let f = |v: Option<f64>| v.map(|x| format!("{x:.0}")).unwrap_or("–".into());
                    vec![
                        c.name.clone(),
                        c.obj_size.to_string(),
                        c.active_objs.to_string(),
                        c.allocs.to_string(),
                        c.frees.to_string(),
                        f(c.alloc_fast_pct),
                        f(c.free_fast_pct),
                        format!("{}/s", si(c.churn_per_s)),
                    ]
                })
                .collect(),
        );
        p.notes.push(format!("method: {}", s.method));
    }
    out.push(p);

    let mut p = Part::new("diag-wakeups", "Wake-ups and idle states");
    if let Some(w) = present(&mut p, &d.wakeups) {
        p.table(
            &["process", "wake-ups/s", "preempted/s"],
            w.processes
                .iter()
                .take(ROWS)
                .map(|k| {
                    vec![
                        who(k.pid, &k.comm, k.processes),
                        si(k.wakeups_per_s),
                        si(k.preempted_per_s),
                    ]
                })
                .collect(),
        );
        p.table(
            &["C-state", "residency", "entries/s"],
            w.cstates
                .iter()
                .map(|c| {
                    vec![
                        c.name.clone(),
                        format!("{}%", sig(c.residency_pct)),
                        si(c.entries_per_s),
                    ]
                })
                .collect(),
        );
        if !w.cstates_missing.is_empty() {
            p.text.push(w.cstates_missing.clone());
        }
        p.notes.push(format!("method: {}", w.method));
    }
    out.push(p);

    let mut p = Part::new("diag-startup", "Start-up anatomy");
    if let Some(s) = present(&mut p, &d.startup) {
        let row = |r: &crate::model::diagnosis::StartupRuns| {
            let l = r.linker.as_ref();
            let n = |f: &dyn Fn(&crate::model::diagnosis::LinkerStats) -> String| {
                l.map(f).unwrap_or_else(|| "–".into())
            };
            vec![
                r.mode.clone(),
                r.runs.to_string(),
                seconds(r.wall_s),
                r.minor_faults.to_string(),
                r.major_faults.to_string(),
                n(&|l| format!("{} {}", si(l.startup), l.unit)),
                n(&|l| format!("{} {}", si(l.relocation), l.unit)),
                // glibc prints the exit figure only on a normal exit through
                // its finalisers (not after _exit): "–" when it did not.
                n(&|l| match l.final_relocations {
                    0 => format!("{}/–", l.relocations),
                    f => format!("{}/{f}", l.relocations),
                }),
            ]
        };
        let mut rows = vec![row(&s.default)];
        if let Some(b) = &s.bind_now {
            rows.push(row(b));
        }
        p.table(
            &[
                "mode",
                "runs",
                "exec→exit",
                "minor faults",
                "major faults",
                "in ld.so",
                "relocating",
                "relocations start/exit",
            ],
            rows,
        );
        if !s.libraries.is_empty() {
            p.text
                .push(format!("libraries loaded: {}", s.libraries.join(", ")));
        }
        p.notes.push(format!("method: {}", s.method));
    }
    out.push(p);
    out
}

/// The diagnosis as terminal text (`show`, and `diagnose` itself).
pub fn text(d: &Diagnosis) -> String {
    let mut s = String::new();
    for p in parts(d) {
        s.push_str(&format!("\n== {} ==\n", p.title));
        for t in &p.text {
            s.push_str(t);
            s.push('\n');
        }
        for (h, rows) in &p.tables {
            let h: Vec<&str> = h.iter().map(String::as_str).collect();
            s.push_str(&super::table::render(&h, rows.clone()));
        }
        if p.flame.is_some() {
            s.push_str("(flame graph in `tunelab report RUN -o diagnosis.html`)\n");
        }
        for n in &p.notes {
            s.push_str(&format!("  {n}\n"));
        }
    }
    s
}

/// Report sections of a diagnosis; flame graphs drawn by `flame`.
pub fn sections(d: &Diagnosis, flame: Flame) -> Vec<DocSection> {
    parts(d)
        .into_iter()
        .map(|p| {
            let mut blocks: Vec<Block> = p.text.into_iter().map(Block::Text).collect();
            for (header, rows) in p.tables {
                blocks.push(Block::Table(Table {
                    header,
                    rows: rows
                        .into_iter()
                        .map(|r| r.into_iter().map(Cell::from).collect())
                        .collect(),
                }));
            }
            if let Some((stacks, title)) = p.flame {
                blocks.push(Block::Figure(DocFigure {
                    svg: flame(&stacks, &title),
                    title,
                }));
            }
            if !p.notes.is_empty() {
                blocks.push(Block::Notes(p.notes));
            }
            DocSection {
                id: p.id.into(),
                title: p.title,
                blocks,
            }
        })
        .collect()
}
