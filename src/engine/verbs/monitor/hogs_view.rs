//! `tunelab monitor hogs`.

use super::*;

pub(super) struct HogsView {
    pub(super) reader: HogsReader,
    pub(super) prev: Vec<TaskTimes>,
    pub(super) threads: bool,
    pub(super) filter: HogsFilter,
    pub(super) ncpu: usize,
    pub(super) hz: u64,
}

impl ViewState for HogsView {
    fn sample(&mut self, secs: f64) -> Result<Emitted> {
        let cur = self.reader.read(self.threads);
        let rows = hogs::delta(&self.prev, &cur, secs, self.ncpu, self.hz, self.filter);
        self.prev = cur;
        let mut e = Emitted::default();
        let _ = writeln!(
            e.table,
            "{:>8} {:<16} {:>9} {:>8} {:>8}",
            if self.threads { "TID" } else { "PID" },
            "NAME",
            "CPU s",
            "% 1 CPU",
            "% all"
        );
        for r in &rows {
            let _ = writeln!(
                e.table,
                "{:>8} {:<16} {:>9.3} {:>7.1}% {:>7.1}%",
                r.tid.unwrap_or(r.pid),
                r.name,
                r.cpu_s,
                r.pct_cpu,
                r.pct_machine
            );
            let l = format!(
                "pid=\"{}\",{}name=\"{}\"",
                r.pid,
                r.tid.map(|t| format!("tid=\"{t}\",")).unwrap_or_default(),
                r.name.replace('\\', "\\\\").replace('"', "\\\"")
            );
            e.metrics
                .push(("tunelab_hogs_cpu_percent".into(), l, r.pct_cpu));
        }
        e.table.push('\n');
        e.json = json!({ "tasks": rows });
        Ok(e)
    }
}
