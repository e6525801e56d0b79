//! `work.sort`: the mail-client sort. A folder of `n` synthetic message
//! headers (seeded, see `data.rs`) is sorted by subject (ignoring "Re:"
//! prefixes), date, sender and size, the way a mail client re-sorts its
//! message list when the user clicks a column header.

use std::cmp::Ordering;
use std::time::Instant;

use crate::engine::{
    Ctx, Experiment, Metric, MetricSpec, ParamKind, ParamSpec, Point, PointExtras, PointRun,
    RunDefaults, Series, TrialValues,
};
use crate::engine::{Needs, Spec};
use crate::experiments::common::data::{fingerprint, mail_folder, Message};
use crate::stats;
use crate::Result;

pub(crate) struct Sort;

/// The sort keys, in metric order.
pub(crate) const KEYS: [Key; 4] = [Key::Subject, Key::Date, Key::Sender, Key::Size];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    Subject,
    Date,
    Sender,
    Size,
}

impl Key {
    fn metric(self) -> Metric {
        match self {
            Key::Subject => SUBJECT_TIME,
            Key::Date => DATE_TIME,
            Key::Sender => SENDER_TIME,
            Key::Size => SIZE_TIME,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Key::Subject => "subject",
            Key::Date => "date",
            Key::Sender => "sender",
            Key::Size => "size",
        }
    }
    /// The comparator a mail client uses for this column.
    fn compare(self, a: &Message, b: &Message) -> Ordering {
        match self {
            Key::Subject => cmp_ignore_case(strip_re(&a.subject), strip_re(&b.subject)),
            Key::Date => a.date.cmp(&b.date),
            Key::Sender => cmp_ignore_case(&a.sender, &b.sender),
            Key::Size => a.size.cmp(&b.size),
        }
    }
}

/// The subject without any number of leading "Re:" prefixes (any case,
/// optional spaces), as mail clients thread and sort replies.
pub(crate) fn strip_re(mut s: &str) -> &str {
    loop {
        let t = s.trim_start();
        match t.get(..3) {
            Some(p) if p.eq_ignore_ascii_case("re:") => s = &t[3..],
            _ => return t,
        }
    }
}

/// ASCII case-insensitive ordering, byte by byte.
pub(crate) fn cmp_ignore_case(a: &str, b: &str) -> Ordering {
    a.bytes()
        .map(|c| c.to_ascii_lowercase())
        .cmp(b.bytes().map(|c| c.to_ascii_lowercase()))
}

/// Sort `order` (indices into `msgs`) by `key` with a stable merge sort
/// (`slice::sort_by`); returns the number of comparisons made.
pub(crate) fn sort_by_key(msgs: &[Message], order: &mut [u32], key: Key) -> u64 {
    let mut n = 0u64;
    order.sort_by(|&a, &b| {
        n += 1;
        key.compare(&msgs[a as usize], &msgs[b as usize])
    });
    n
}

pub(crate) static SPEC: Spec = Spec {
    name: "work.sort",
    summary: "sort a synthetic mail folder by subject, date, sender and size (mail client)",
    method: "Generates a folder of `n` synthetic message headers in memory from a SmallRng seeded \
         with `seed` (outside the timing): subjects of 2-7 words drawn from a fixed vocabulary \
         with Zipf-like (1/rank) frequency, ~30% with a \"Re: \" prefix (some nested \"Re: Re:\", \
         some \"RE:\"), senders \"Name <address>\" from a pool of 300 with Zipf-like frequency, \
         dates uniform over 2025, sizes log-normal (median ~4 KB). The same seed always gives \
         the same folder. A sort reorders an index array (the client's message list, in arrival \
         order) with Rust's stable merge sort (slice::sort_by) and a comparator per column: \
         subject = case-insensitive after stripping every leading \"Re:\" (done in the \
         comparator, as a client does on the fly), date and size numerically, sender \
         case-insensitive. Only the sort is timed; copying the arrival order before each sort \
         is not. Sorts repeat until each key has run at least the trial time (200 ms by default) per trial; \
         <key>_time = seconds per sort, total_time = their sum (one sort by each key). \
         `comparisons` counts comparator calls for one sort by each key (deterministic for a \
         seed): the work done, independent of the machine; n log n predicts ~13x more \
         comparisons for 10x messages at n = 1000 -> 10000. Each point also carries one-point \
         series per key named `sort time <key>` (x = n) that the charts join into time-vs-n \
         curves.",
    params: &[
            ParamSpec::new(
                "n",
                ParamKind::Count,
                "1000,10000",
                "messages in the folder (sweep)",
            )
            .range(2.0, 5e6),
            ParamSpec::new(
                "seed",
                ParamKind::Count,
                "42",
                "seed of the generated folder",
            ),
        ],
    metrics: &[
            MetricSpec::lower(
                "subject_time",
                "s",
                "seconds per sort by subject (Re: ignored)",
            ),
            MetricSpec::lower("date_time", "s", "seconds per sort by date"),
            MetricSpec::lower("sender_time", "s", "seconds per sort by sender"),
            MetricSpec::lower("size_time", "s", "seconds per sort by size"),
            MetricSpec::lower("total_time", "s", "one sort by each of the four keys"),
            MetricSpec::lower(
                "comparisons",
                "count",
                "comparator calls for one sort by each key",
            ),
        ],
    needs: Needs::NOTHING,
    defaults: RunDefaults::new(1, 5, 15, 60.0),
    hidden: false,
};

// The metrics a trial emits, checked against the Spec while compiling.
const COMPARISONS: Metric = SPEC.emits("comparisons");
const SUBJECT_TIME: Metric = SPEC.emits("subject_time");
const DATE_TIME: Metric = SPEC.emits("date_time");
const SENDER_TIME: Metric = SPEC.emits("sender_time");
const SIZE_TIME: Metric = SPEC.emits("size_time");
const TOTAL_TIME: Metric = SPEC.emits("total_time");

/// A point's parameters, read by name once, here.
struct Params {
    n: usize,
    seed: u64,
}

impl Params {
    fn parse(p: &Point) -> Result<Params> {
        Ok(Params {
            n: p.usize("n")?,
            seed: p.u64("seed")?,
        })
    }
}

impl Experiment for Sort {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }
    fn prepare(&self, ctx: &Ctx, p: &Point) -> Result<Box<dyn PointRun>> {
        let Params { n, seed } = Params::parse(p)?;
        let msgs = mail_folder(n, seed);
        let print = fingerprint(msgs.iter().flat_map(|m| {
            m.subject
                .bytes()
                .chain(m.sender.bytes())
                .chain(m.date.to_le_bytes())
                .chain(m.size.to_le_bytes())
        }));
        let arrival: Vec<u32> = (0..n as u32).collect();
        let mut run = SortRun {
            msgs,
            arrival: arrival.clone(),
            work: arrival,
            reps: [1; 4],
            fingerprint: print,
            samples: Default::default(),
        };
        // Calibrate: sorts per key so each key runs >= the trial time per trial.
        for (i, key) in KEYS.iter().enumerate() {
            let (secs, _) = run.sort_once(*key);
            run.reps[i] = ((ctx.trial_time().as_secs_f64() / secs.max(1e-7)).ceil() as u64).max(1);
        }
        Ok(Box::new(run))
    }
}

struct SortRun {
    msgs: Vec<Message>,
    arrival: Vec<u32>,
    work: Vec<u32>,
    reps: [u64; 4],
    fingerprint: u64,
    /// Per-trial seconds per sort, per key.
    samples: [Vec<f64>; 4],
}

impl SortRun {
    /// One timed sort from arrival order: (seconds, comparisons).
    fn sort_once(&mut self, key: Key) -> (f64, u64) {
        self.work.copy_from_slice(&self.arrival);
        let t = Instant::now();
        let c = sort_by_key(&self.msgs, &mut self.work, key);
        let dt = t.elapsed().as_secs_f64();
        std::hint::black_box(&self.work);
        (dt, c)
    }
}

impl PointRun for SortRun {
    fn trial(&mut self, ctx: &Ctx) -> Result<TrialValues> {
        let mut v = TrialValues::new();
        let (mut total, mut comparisons) = (0.0, 0u64);
        for (i, key) in KEYS.iter().enumerate() {
            let mut secs = 0.0;
            let mut cmp = 0;
            for r in 0..self.reps[i] {
                if r % 64 == 0 {
                    ctx.check_cancel()?;
                }
                let (dt, c) = self.sort_once(*key);
                secs += dt;
                cmp = c;
            }
            let per = secs / self.reps[i] as f64;
            self.samples[i].push(per);
            v.set(key.metric(), per);
            total += per;
            comparisons += cmp;
        }
        v.set(TOTAL_TIME, total);
        v.set(COMPARISONS, comparisons as f64);
        Ok(v)
    }

    fn finish(&mut self, _ctx: &Ctx) -> Result<PointExtras> {
        let n = self.msgs.len() as f64;
        let series = KEYS
            .iter()
            .zip(&self.samples)
            .filter(|(_, s)| !s.is_empty())
            .map(|(k, s)| Series {
                name: format!("sort time {}", k.name()),
                x_label: "n".into(),
                x_unit: "count".into(),
                y_label: k.metric().name().into(),
                y_unit: "s".into(),
                points: vec![(n, stats::summarize(s).median)],
            })
            .collect();
        let re = self
            .msgs
            .iter()
            .filter(|m| strip_re(&m.subject).len() != m.subject.len())
            .count();
        Ok(PointExtras {
            series,
            notes: vec![
                format!(
                    "folder: {} messages, {} with Re: prefixes, data fingerprint {:016x}; \
                     sorts per trial (subject, date, sender, size): {:?}",
                    self.msgs.len(),
                    re,
                    self.fingerprint,
                    self.reps
                ),
                "in memory only: no files, the page cache and the device are not involved".into(),
            ],
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn re_prefixes_are_ignored() {
        assert_eq!(strip_re("Re: Re: RE:re:  Hello"), "Hello");
        assert_eq!(strip_re("Regarding x"), "Regarding x");
        assert_eq!(strip_re("Re"), "Re");
        assert_eq!(cmp_ignore_case("abc", "ABD"), Ordering::Less);
    }

    #[test]
    fn sorts_are_correct_and_count_work() {
        let msgs = mail_folder(3000, 9);
        for key in KEYS {
            let mut order: Vec<u32> = (0..msgs.len() as u32).collect();
            let c = sort_by_key(&msgs, &mut order, key);
            assert!(c >= msgs.len() as u64 - 1);
            for w in order.windows(2) {
                let (a, b) = (&msgs[w[0] as usize], &msgs[w[1] as usize]);
                assert_ne!(key.compare(a, b), Ordering::Greater, "{key:?}");
            }
        }
        // Replies sort next to their originals.
        let mut order: Vec<u32> = (0..msgs.len() as u32).collect();
        sort_by_key(&msgs, &mut order, Key::Subject);
        let first = &msgs[order[0] as usize].subject;
        assert!(!strip_re(first).is_empty());
    }
}
