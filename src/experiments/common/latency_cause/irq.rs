//! The `irq-deltas` method: /proc/interrupts, /proc/softirqs and the
//! per-CPU steal of /proc/stat read around a spike, and the rows that grew
//! on the spike's CPU (timer and IPI plumbing left out).

/// Per-CPU counts of one /proc/interrupts or /proc/softirqs row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IrqRow {
    pub(crate) name: String,
    pub(crate) device: String,
    pub(crate) counts: Vec<u64>,
}

/// Parse /proc/interrupts or /proc/softirqs with the monitor's parser
/// (`observe::irq`: a "CPU0 CPU1 …" header, then "NAME: counts… [description]"
/// rows, short rows padded with zeros).
pub(crate) fn parse_irq_table(text: &str) -> Vec<IrqRow> {
    crate::observe::irq::parse(text)
        .into_iter()
        .map(|r| IrqRow {
            name: r.source,
            device: r.desc,
            counts: r.per_cpu,
        })
        .collect()
}

/// Interrupts that are the measurement's own or the scheduler's plumbing,
/// never a culprit: local timer (our own hrtimer fires it), rescheduling,
/// call-function and TLB IPIs, and the timer/hrtimer/sched/RCU softirqs.
pub(super) fn is_plumbing(name: &str) -> bool {
    matches!(
        name,
        "LOC"
            | "RES"
            | "CAL"
            | "TLB"
            | "IWI"
            | "TIMER"
            | "HRTIMER"
            | "SCHED"
            | "RCU"
            | "NMI"
            | "PMI"
            | "SPU"
            | "THR"
            | "MCP"
    ) || name.starts_with("IPI")
}

#[derive(Default)]
pub(super) struct IrqSnap {
    pub(super) irqs: Vec<IrqRow>,
    pub(super) softirqs: Vec<IrqRow>,
    /// Per CPU steal time in USER_HZ ticks (/proc/stat).
    pub(super) steal: Vec<u64>,
}

/// Steal ticks per CPU from /proc/stat ("cpuN user nice system idle iowait
/// irq softirq steal …").
pub(crate) fn parse_steal(stat: &str) -> Vec<u64> {
    let mut v = Vec::new();
    for (cpu, t) in crate::system::proc::cpu::per_cpu(stat) {
        let steal = t.steal();
        if v.len() <= cpu {
            v.resize(cpu + 1, 0);
        }
        v[cpu] = steal;
    }
    v
}

impl IrqSnap {
    pub(super) fn read() -> IrqSnap {
        let r = |p| crate::system::proc::read(p).unwrap_or_default();
        IrqSnap {
            irqs: parse_irq_table(&r("interrupts")),
            softirqs: parse_irq_table(&r("softirqs")),
            steal: parse_steal(&r("stat")),
        }
    }
}

/// Rows whose count on `cpu` grew from `old` to `new`, not plumbing, most first.
pub(super) fn grown(old: &[IrqRow], new: &[IrqRow], cpu: usize) -> Vec<(IrqRow, u64)> {
    let mut v: Vec<(IrqRow, u64)> = new
        .iter()
        .filter(|r| !is_plumbing(&r.name))
        .filter_map(|r| {
            let now = *r.counts.get(cpu)?;
            let was = old
                .iter()
                .find(|o| o.name == r.name)
                .and_then(|o| o.counts.get(cpu).copied())
                .unwrap_or(now);
            (now > was).then(|| (r.clone(), now - was))
        })
        .collect();
    v.sort_by_key(|g| std::cmp::Reverse(g.1));
    v
}
