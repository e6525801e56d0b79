//! The open-unit limit, flashbench's `--open-au` measured to a steady
//! state: N sequential streams written in turn, each in its own region,
//! for N = 1, 2, …; a card that keeps fewer units open than there are
//! streams closes one on nearly every write, and the rate collapses.

use super::steady::{self, Load, Rule};
use super::{Cancel, FlashIo};
use crate::{Error, Result};

/// A rate below this share of one stream's is a collapse.
pub(crate) const COLLAPSE: f64 = 0.5;

#[derive(Clone, Debug)]
pub struct Plan {
    pub max_streams: usize,
    pub spacing: u64,
    pub chunk: u64,
    pub min_bytes: u64,
    /// Seconds each stream count may take.
    pub max_time: f64,
}

#[derive(Clone, Debug)]
pub struct StreamPoint {
    pub(crate) streams: usize,
    /// The steady rate, or None when the rule did not hold in time.
    pub(crate) rate: Option<f64>,
    pub(crate) elapsed: f64,
}

#[derive(Clone, Debug)]
pub struct OpenUnits {
    pub points: Vec<StreamPoint>,
    /// The stream count whose rate first fell below COLLAPSE × one stream's.
    pub(crate) collapse_at: Option<usize>,
}

impl OpenUnits {
    /// Units the card keeps open: the count before the collapse.
    pub fn limit(&self) -> Option<usize> {
        self.collapse_at.map(|n| n - 1)
    }
}

pub fn measure(
    io: &mut dyn FlashIo,
    plan: &Plan,
    rule: &Rule,
    buf: &[u8],
    cancel: Cancel,
) -> Result<OpenUnits> {
    let load = |streams, skip, min_bytes| Load {
        streams,
        spacing: plan.spacing,
        chunk: plan.chunk,
        skip,
        min_bytes,
        max_time: plan.max_time,
    };
    let first = steady::run(io, &load(1, 0, plan.min_bytes), rule, buf, cancel)?;
    let Some(base) = first.steady else {
        return Err(Error::measurement(format!(
            "one stream did not reach a steady state in {:.0} s; give it longer (max_time=) \
             or loosen the rule (range=, slope=)",
            plan.max_time
        )));
    };
    // After each change of pattern the cache first drains the previous
    // one's data: skip the bytes the burst took, and a fifth more.
    let skip = (first.burst_bytes() * 1.2) as u64;
    let mut points = vec![StreamPoint {
        streams: 1,
        rate: Some(base),
        elapsed: first.elapsed,
    }];
    let mut collapse_at = None;
    for n in 2..=plan.max_streams {
        io.flush()?;
        let o = steady::run(io, &load(n, skip, 0), rule, buf, cancel)?;
        points.push(StreamPoint {
            streams: n,
            rate: o.steady,
            elapsed: o.elapsed,
        });
        if o.steady.is_some_and(|r| r < COLLAPSE * base) {
            collapse_at = Some(n);
            break;
        }
    }
    Ok(OpenUnits {
        points,
        collapse_at,
    })
}
