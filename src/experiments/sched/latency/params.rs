//! sched.latency's parameters, read by name once, here; the rest of the
//! experiment is handed this struct.

use crate::engine::Point;
use crate::experiments::common::latency_load::Mix;
use crate::Result;

use super::threads::parse_cpus;

pub(super) struct Params {
    pub(crate) cpus: Vec<usize>,
    pub(crate) mix: Mix,
    /// The SCHED_FIFO priority asked for (policy=fifo), else None.
    pub(crate) fifo: Option<i32>,
    /// cpu_dma_latency=0: hold /dev/cpu_dma_latency at 0 µs.
    pub(crate) dma_zero: bool,
    /// "off", or how spike causes are traced.
    pub(crate) causes: String,
    pub(crate) period: f64,
    pub(crate) duration: f64,
    pub(crate) threshold: f64,
}

impl Params {
    /// A bad CPU list or load mix is a usage error here.
    pub(super) fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            cpus: parse_cpus(p.text("cpus")?)?,
            mix: Mix::parse(p.text("load")?)?,
            fifo: (p.text("policy")? == "fifo").then_some(p.u64("priority")? as i32),
            dma_zero: p.text("cpu_dma_latency")? == "0",
            causes: p.text("causes")?.to_string(),
            period: p.f64("period")?,
            duration: p.f64("duration")?,
            threshold: p.f64("threshold")?,
        })
    }
}
