//! The monitor section of a report: the background sampler's series
//! (dirty pages, writeback, CPU) over the run.

use super::{figure, Block, Section};
use crate::model::run::Run;
use crate::report::charts::{Axis, Chart, Line, LineChart};
use crate::report::pick_charts::median_of;

pub(super) fn monitor_section(run: &Run) -> Option<Section> {
    let s = &run.samples;
    if s.is_empty() {
        return None;
    }
    let line = |name: &str, f: &dyn Fn(&crate::observe::sampler::MonitorSample) -> f64| Line {
        name: name.to_string(),
        points: s.iter().map(|x| (x.t, f(x))).collect(),
        ..Default::default()
    };
    let t = || Axis::new("time since the run started", "s");
    let mut blocks = vec![Block::Text(format!(
        "{} samples of vmstat, the target's disk statistics and Dirty/Writeback, \
         about one per second.",
        s.len()
    ))];
    let throttle = median_of(s.iter().map(|x| x.dirty.throttle_point() as f64).collect());
    let background = median_of(
        s.iter()
            .map(|x| x.dirty.background_threshold_bytes as f64)
            .collect(),
    );
    blocks.push(figure(Chart::Line(LineChart {
        title: "Dirty and Writeback page cache".into(),
        x: t(),
        y: Axis::new("memory", "B"),
        lines: vec![
            line("Dirty", &|x| x.dirty.dirty_bytes as f64),
            line("Writeback", &|x| x.dirty.writeback_bytes as f64),
            Line {
                dashed: true,
                ..line("Dirty + Writeback", &|x| {
                    (x.dirty.dirty_bytes + x.dirty.writeback_bytes) as f64
                })
            },
        ],
        vlines: Vec::new(),
        hlines: vec![
            (throttle, "writers throttled above".into()),
            (background, "background writeback starts".into()),
        ],
    })));
    blocks.push(figure(Chart::Line(LineChart {
        title: "CPU: iowait, user and system time".into(),
        x: t(),
        y: Axis::new("share of all CPUs", "%"),
        lines: vec![
            line("iowait %", &|x| x.vmstat.wa),
            line("user %", &|x| x.vmstat.us),
            line("system %", &|x| x.vmstat.sy),
        ],
        vlines: Vec::new(),
        hlines: Vec::new(),
    })));
    let disk = s
        .iter()
        .find_map(|x| x.disk.as_ref().map(|d| d.device.clone()));
    let (title, lines) = match &disk {
        Some(dev) => (
            format!("Disk {dev}: read and write throughput"),
            vec![
                line(&format!("{dev} read"), &|x| {
                    x.disk.as_ref().map_or(f64::NAN, |d| d.rkb_s * 1024.0)
                }),
                line(&format!("{dev} write"), &|x| {
                    x.disk.as_ref().map_or(f64::NAN, |d| d.wkb_s * 1024.0)
                }),
            ],
        ),
        None => (
            "Block I/O of all devices (vmstat bi/bo)".to_string(),
            vec![
                line("block in (bi)", &|x| x.vmstat.bi * 1024.0),
                line("block out (bo)", &|x| x.vmstat.bo * 1024.0),
            ],
        ),
    };
    blocks.push(figure(Chart::Line(LineChart {
        title,
        x: t(),
        y: Axis::new("throughput", "B/s"),
        lines,
        vlines: Vec::new(),
        hlines: Vec::new(),
    })));
    Some(Section {
        id: "monitor".into(),
        title: "Monitor".into(),
        blocks,
    })
}
