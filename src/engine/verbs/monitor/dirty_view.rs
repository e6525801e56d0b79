//! `tunelab monitor dirty`.

use super::*;

pub(super) struct DirtyView {
    pub(super) watch: DirtyWatch,
    pub(super) lines: usize,
}

pub(super) fn read_dirty_sample() -> Result<(DirtySample, dirty::DirtyLimits)> {
    let t = std::fs::read_to_string("/proc/meminfo")
        .map_err(|e| env_err("cannot read /proc/meminfo", e))?;
    let m = crate::observe::procmem::parse_meminfo(&t);
    let kb = |k: &str| {
        t.lines()
            .find_map(|l| {
                l.strip_prefix(k)?
                    .strip_prefix(':')?
                    .split_whitespace()
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
            * 1024
    };
    let limits = dirty::read_limits().map_err(|e| env_err("cannot read vm.dirty_* sysctls", e))?;
    Ok((
        DirtySample {
            dirty: kb("Dirty"),
            writeback: kb("Writeback"),
            available: m.available,
            cache: kb("Cached") + kb("Buffers"),
        },
        limits,
    ))
}

impl ViewState for DirtyView {
    fn preface(&self) -> Vec<String> {
        let l = &self.watch.limits;
        vec![format!(
            "throttling starts when Dirty + Writeback exceeds {} (vm.dirty_ratio {} / bytes {}, \
             vm.dirty_background_ratio {} / bytes {}; kernel: balance_dirty_pages freerun point)",
            if l.bytes > 0 {
                "(dirty_bytes + dirty_background_bytes) / 2"
            } else {
                "(dirty_ratio + dirty_background_ratio) / 2 % of MemAvailable"
            },
            l.ratio,
            l.bytes,
            l.background_ratio,
            l.background_bytes
        )]
    }

    fn sample(&mut self, _secs: f64) -> Result<Emitted> {
        let (s, limits) = read_dirty_sample()?;
        if limits != self.watch.limits {
            // Sysctls changed while watching: restart the accounting.
            self.watch = DirtyWatch::new(limits);
        }
        let line = self.watch.observe(&s);
        let mut e = Emitted::default();
        if self.lines.is_multiple_of(20) {
            let _ = writeln!(
                e.table,
                "{:>12} {:>12} {:>12} {:>12} {:>12} {:>8}",
                "dirty", "writeback", "available", "cache", "throttle at", "% of it"
            );
        }
        self.lines += 1;
        let _ = writeln!(
            e.table,
            "{:>12} {:>12} {:>12} {:>12} {:>12} {:>7.0}%{}",
            human(line.dirty_bytes as f64, "B"),
            human(line.writeback_bytes as f64, "B"),
            human(line.available_bytes as f64, "B"),
            human(line.cache_bytes as f64, "B"),
            human(line.throttle_bytes as f64, "B"),
            line.pct_of_throttle,
            if line.exceeded { "  THROTTLING" } else { "" }
        );
        if line.exceeded {
            e.warnings.push(format!(
                "Dirty + Writeback = {} exceeds the throttling threshold {}: writers are being slowed down",
                human((line.dirty_bytes + line.writeback_bytes) as f64, "B"),
                human(line.throttle_bytes as f64, "B")
            ));
        }
        for (n, v) in [
            ("dirty_bytes", line.dirty_bytes),
            ("writeback_bytes", line.writeback_bytes),
            ("available_bytes", line.available_bytes),
            ("cache_bytes", line.cache_bytes),
            ("throttle_threshold_bytes", line.throttle_bytes),
        ] {
            e.metrics
                .push((format!("tunelab_dirty_{n}"), String::new(), v as f64));
        }
        e.json = serde_json::to_value(&line)?;
        Ok(e)
    }

    fn finish(&self) -> Option<(String, Value)> {
        let s = self.watch.summary();
        let mut t = String::new();
        let _ = writeln!(t, "\ndirty watch summary ({} samples)", s.samples);
        let _ = writeln!(
            t,
            "  intervals over the throttling threshold: {}",
            s.intervals_over_threshold
        );
        let _ = writeln!(
            t,
            "  least available memory: {}",
            human(s.min_available_bytes as f64, "B")
        );
        let _ = writeln!(
            t,
            "  largest page cache:     {}",
            human(s.max_cache_bytes as f64, "B")
        );
        let _ = writeln!(
            t,
            "  largest Dirty+Writeback: {}",
            human(s.max_dirty_writeback_bytes as f64, "B")
        );
        let _ = writeln!(t, "  must hold: {}", s.inequality);
        for a in &s.advice {
            let _ = writeln!(t, "  {a}");
        }
        Some((t, json!({ "summary": s })))
    }
}
