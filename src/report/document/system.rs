//! The system section of a report: the machine and storage facts the run
//! recorded, hardware first.

use super::{Block, Section, Table};
use crate::model::run::Run;
use crate::units::human;

/// A fact for display: byte counts in binary units.
fn fact_value(key: &str, v: &str) -> String {
    if key.ends_with("_bytes") {
        if let Ok(b) = v.parse::<f64>() {
            if b >= 1024.0 {
                return format!("{} ({v} B)", human(b, "B"));
            }
        }
    }
    v.to_string()
}

fn is_hardware(key: &str) -> bool {
    key.starts_with("cpu.model")
        || key == "cpu.count"
        || key == "cpu.max_mhz"
        || key.starts_with("mem.total")
        || key.starts_with("block.")
        || key == "target.device"
        || key == "target.disk"
}

pub(super) fn system_section(run: &Run) -> Section {
    let env = &run.environment;
    let mut hw = Table::new(&["fact", "value"]);
    let mut sw = Table::new(&["fact", "value"]);
    // The most telling facts first, then the rest alphabetically.
    const FIRST: &[&str] = &[
        "cpu.model",
        "cpu.count",
        "cpu.max_mhz",
        "mem.total_bytes",
        "target.device",
        "target.disk",
        "kernel.release",
        "kernel.version",
        "host.name",
        "target.path",
        "target.fs",
        "target.mount_options",
        "cpu.governor",
        "mm.thp_enabled",
    ];
    let mut keys: Vec<&String> = FIRST
        .iter()
        .filter_map(|k| env.get_key_value(*k).map(|(k, _)| k))
        .collect();
    keys.extend(env.keys().filter(|k| !FIRST.contains(&k.as_str())));
    for k in keys {
        let v = fact_value(k, &env[k]);
        let row = vec![
            k.as_str().into(),
            super::Cell {
                class: (v.chars().count() > 120).then_some("fold"),
                text: v,
            },
        ];
        if is_hardware(k) {
            hw.rows.push(row);
        } else {
            sw.rows.push(row);
        }
    }
    let mut blocks = Vec::new();
    if env.is_empty() {
        blocks.push(Block::Text("No environment was recorded.".into()));
    } else {
        blocks.push(Block::Heading("Hardware".into()));
        blocks.push(Block::Table(hw));
        // Dozens of rows (the kernel command line among them): folded.
        let n = sw.rows.len();
        blocks.push(Block::Collapsed(
            format!("Software and settings ({n} facts)"),
            vec![Block::Table(sw)],
        ));
    }
    let q = &run.quietness;
    if q.seconds > 0.0 {
        let busy: Vec<String> = q
            .busy
            .iter()
            .map(|p| format!("{} (pid {}) {:.0}%", p.name, p.pid, p.cpu_pct))
            .collect();
        blocks.push(Block::Text(format!(
            "Quietness check ({:.1} s before the run): other processes used {:.0}% of the \
             machine's CPU, iowait {:.1}%{}{}.",
            q.seconds,
            q.machine_busy_pct,
            q.iowait_pct,
            q.disk_busy_pct
                .map(|d| format!(", disk {d:.0}% busy"))
                .unwrap_or_default(),
            if busy.is_empty() {
                String::new()
            } else {
                format!("; busiest: {}", busy.join(", "))
            }
        )));
    }
    Section {
        id: "system".into(),
        title: "System".into(),
        blocks,
    }
}
