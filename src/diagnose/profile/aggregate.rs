//! From symbolised stacks to the stored views: the `opreport -l` flat
//! table, the `opreport -c` caller/callee view and folded stacks. Pure data
//! in, pure data out, so it is tested on synthetic samples.

use std::collections::HashMap;

use crate::model::profile::{CallEdge, CallEntry, FoldedStack, SymbolRow};

/// One resolved frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    /// "[kernel]", a binary's file name, or "[unknown]".
    pub(crate) image: String,
    /// Demangled name, or the address in hex when unresolved.
    pub(crate) symbol: String,
}

impl Frame {
    pub(crate) fn new(image: &str, symbol: &str) -> Frame {
        Frame {
            image: image.to_string(),
            symbol: symbol.to_string(),
        }
    }
}

/// A distinct call stack and how many samples hit it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stack {
    /// Process name, the root of the folded stack.
    pub(crate) comm: String,
    /// Leaf (the sampled instruction) first. Empty: nothing known.
    pub(crate) frames: Vec<Frame>,
    /// Samples taken in kernel mode (the rest were user mode).
    pub(crate) kernel_samples: u64,
    pub(crate) samples: u64,
}

/// Limits on what is kept, so a stored run stays small.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Rows of the flat profile; the rest are summed into one row.
    pub(crate) rows: usize,
    /// Symbols given a caller/callee entry.
    pub(crate) callgraph_symbols: usize,
    /// Callers and callees kept per entry.
    pub(crate) edges: usize,
    /// Distinct folded stacks; the rest are summed into "[other stacks]".
    pub(crate) folded: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            rows: 200,
            callgraph_symbols: 20,
            edges: 10,
            folded: 4000,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Aggregated {
    pub(crate) samples: u64,
    pub(crate) user_samples: u64,
    pub(crate) kernel_samples: u64,
    pub(crate) symbols: Vec<SymbolRow>,
    pub(crate) callgraph: Vec<CallEntry>,
    pub(crate) folded: Vec<FoldedStack>,
}

fn unknown_frame() -> Frame {
    Frame::new("[unknown]", "[unknown]")
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// Sort by count descending, then by name so equal counts are stable.
fn sorted_desc<K: Ord + Clone>(map: HashMap<K, u64>) -> Vec<(K, u64)> {
    let mut v: Vec<(K, u64)> = map.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// A frame as it appears in folded stacks and caller/callee names:
/// the symbol, with the image for unresolved addresses (a bare hex
/// address says nothing without its binary).
pub(crate) fn frame_label(f: &Frame) -> String {
    let sym = if f.symbol.starts_with("0x") && !f.image.starts_with('[') {
        format!("{}+{}", f.image, f.symbol)
    } else {
        f.symbol.clone()
    };
    // ';' separates frames and a newline ends a line in the folded format.
    sym.replace([';', '\n', '\r'], ":")
}

pub(crate) fn aggregate(stacks: &[Stack], limits: Limits) -> Aggregated {
    let mut out = Aggregated::default();
    let mut flat: HashMap<(String, String), u64> = HashMap::new();
    for s in stacks {
        out.samples += s.samples;
        out.kernel_samples += s.kernel_samples;
        let leaf = s.frames.first().cloned().unwrap_or_else(unknown_frame);
        *flat.entry((leaf.image, leaf.symbol)).or_default() += s.samples;
    }
    out.user_samples = out.samples - out.kernel_samples;

    // Flat profile (opreport -l).
    let total = out.samples;
    let rows = sorted_desc(flat);
    let mut other = 0u64;
    let mut other_n = 0usize;
    for (i, ((image, symbol), n)) in rows.iter().enumerate() {
        if i < limits.rows {
            out.symbols.push(SymbolRow {
                samples: *n,
                percent: percent(*n, total),
                image: image.clone(),
                symbol: symbol.clone(),
            });
        } else {
            other += n;
            other_n += 1;
        }
    }
    if other_n > 0 {
        out.symbols.push(SymbolRow {
            samples: other,
            percent: percent(other, total),
            image: String::new(),
            symbol: format!("[{other_n} other symbols]"),
        });
    }

    // Caller/callee view (opreport -c) for the top symbols by self samples.
    for row in rows.iter().take(limits.callgraph_symbols) {
        let ((image, symbol), self_samples) = row;
        let target = Frame::new(image, symbol);
        let mut total_samples = 0u64;
        let mut callers: HashMap<String, u64> = HashMap::new();
        let mut callees: HashMap<String, u64> = HashMap::new();
        for s in stacks {
            if !s.frames.contains(&target) {
                continue;
            }
            total_samples += s.samples;
            // One count per stack and neighbour, also under recursion, so
            // an edge never exceeds the symbol's total.
            let mut seen_callers: Vec<String> = Vec::new();
            let mut seen_callees: Vec<String> = Vec::new();
            for (i, f) in s.frames.iter().enumerate() {
                if *f != target {
                    continue;
                }
                if let Some(caller) = s.frames.get(i + 1) {
                    let l = frame_label(caller);
                    if !seen_callers.contains(&l) {
                        seen_callers.push(l);
                    }
                }
                if i > 0 {
                    let l = frame_label(&s.frames[i - 1]);
                    if !seen_callees.contains(&l) {
                        seen_callees.push(l);
                    }
                }
            }
            for l in seen_callers {
                *callers.entry(l).or_default() += s.samples;
            }
            for l in seen_callees {
                *callees.entry(l).or_default() += s.samples;
            }
        }
        let edges = |m: HashMap<String, u64>| -> Vec<CallEdge> {
            sorted_desc(m)
                .into_iter()
                .take(limits.edges)
                .map(|(symbol, samples)| CallEdge { symbol, samples })
                .collect()
        };
        out.callgraph.push(CallEntry {
            symbol: symbol.clone(),
            image: image.clone(),
            self_samples: *self_samples,
            total_samples,
            callers: edges(callers),
            callees: edges(callees),
        });
    }

    // Folded stacks, root first, the process name as the root frame.
    let mut folded: HashMap<String, u64> = HashMap::new();
    for s in stacks {
        let mut parts: Vec<String> = Vec::with_capacity(s.frames.len() + 1);
        parts.push(if s.comm.is_empty() {
            "[unknown]".to_string()
        } else {
            s.comm.replace([';', '\n', '\r'], ":")
        });
        if s.frames.is_empty() {
            parts.push("[unknown]".to_string());
        }
        parts.extend(s.frames.iter().rev().map(frame_label));
        *folded.entry(parts.join(";")).or_default() += s.samples;
    }
    let folded = sorted_desc(folded);
    let mut rest = 0u64;
    for (i, (stack, samples)) in folded.into_iter().enumerate() {
        if i < limits.folded {
            out.folded.push(FoldedStack { stack, samples });
        } else {
            rest += samples;
        }
    }
    if rest > 0 {
        out.folded.push(FoldedStack {
            stack: "[other stacks]".to_string(),
            samples: rest,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(comm: &str, frames: &[(&str, &str)], samples: u64, kernel: u64) -> Stack {
        Stack {
            comm: comm.to_string(),
            frames: frames.iter().map(|(i, s)| Frame::new(i, s)).collect(),
            kernel_samples: kernel,
            samples,
        }
    }

    fn fixture() -> Vec<Stack> {
        vec![
            // leaf first
            st(
                "app",
                &[("app", "hot"), ("app", "work"), ("app", "main")],
                60,
                0,
            ),
            st(
                "app",
                &[("app", "cold"), ("app", "work"), ("app", "main")],
                10,
                0,
            ),
            st(
                "app",
                &[
                    ("[kernel]", "copy_user"),
                    ("[kernel]", "sys_read"),
                    ("app", "main"),
                ],
                25,
                25,
            ),
            st("app", &[("libc.so.6", "0x1f2e")], 4, 0),
            st("app", &[], 1, 0),
        ]
    }

    #[test]
    fn flat_rows_are_sorted_and_percentages_sum_to_100() {
        let a = aggregate(&fixture(), Limits::default());
        assert_eq!(a.samples, 100);
        assert_eq!(a.kernel_samples, 25);
        assert_eq!(a.user_samples, 75);
        let names: Vec<&str> = a.symbols.iter().map(|r| r.symbol.as_str()).collect();
        assert_eq!(names, ["hot", "copy_user", "cold", "0x1f2e", "[unknown]"]);
        assert_eq!(a.symbols[0].image, "app");
        assert_eq!(a.symbols[1].image, "[kernel]");
        assert!((a.symbols[0].percent - 60.0).abs() < 1e-9);
        let sum: f64 = a.symbols.iter().map(|r| r.percent).sum();
        assert!((sum - 100.0).abs() < 1e-9, "sum {sum}");
        assert_eq!(a.symbols.iter().map(|r| r.samples).sum::<u64>(), 100);
    }

    #[test]
    fn rows_over_the_limit_become_one_other_row() {
        let limits = Limits {
            rows: 2,
            ..Limits::default()
        };
        let a = aggregate(&fixture(), limits);
        assert_eq!(a.symbols.len(), 3);
        assert_eq!(a.symbols[2].symbol, "[3 other symbols]");
        assert_eq!(a.symbols[2].samples, 15);
        let sum: f64 = a.symbols.iter().map(|r| r.percent).sum();
        assert!((sum - 100.0).abs() < 1e-9);
    }

    #[test]
    fn callgraph_counts_callers_callees_and_totals() {
        let a = aggregate(&fixture(), Limits::default());
        let work = aggregate(
            &fixture(),
            Limits {
                callgraph_symbols: 10,
                ..Limits::default()
            },
        );
        // "hot": self 60, called from work 60 times, calls nothing.
        let hot = &a.callgraph[0];
        assert_eq!((hot.symbol.as_str(), hot.self_samples), ("hot", 60));
        assert_eq!(hot.total_samples, 60);
        assert_eq!(
            hot.callers,
            vec![CallEdge {
                symbol: "work".into(),
                samples: 60
            }]
        );
        assert!(hot.callees.is_empty());
        // copy_user is called by sys_read.
        let cu = &a.callgraph[1];
        assert_eq!(cu.symbol, "copy_user");
        assert_eq!(cu.callers[0].symbol, "sys_read");
        // Unresolved frames are labelled with their image.
        assert!(work.callgraph.iter().any(|e| e.symbol == "0x1f2e"));
        // "main" never is a leaf so it has no entry, but its callee edges
        // are visible from the entries above.
        assert!(!a.callgraph.iter().any(|e| e.symbol == "main"));
    }

    #[test]
    fn recursion_counts_once_per_stack() {
        let s = vec![st(
            "r",
            &[("r", "f"), ("r", "f"), ("r", "f"), ("r", "main")],
            7,
            0,
        )];
        let a = aggregate(&s, Limits::default());
        let f = &a.callgraph[0];
        assert_eq!(f.total_samples, 7);
        // callers of f: f (recursion) and main, each at most total.
        assert!(f.callers.iter().all(|e| e.samples <= f.total_samples));
        assert_eq!(f.callers.len(), 2);
        assert_eq!(
            f.callees,
            vec![CallEdge {
                symbol: "f".into(),
                samples: 7
            }]
        );
    }

    #[test]
    fn folded_stacks_are_root_first_with_the_process_as_root() {
        let a = aggregate(&fixture(), Limits::default());
        let f: Vec<(&str, u64)> = a
            .folded
            .iter()
            .map(|f| (f.stack.as_str(), f.samples))
            .collect();
        assert_eq!(f[0], ("app;main;work;hot", 60));
        assert!(f.contains(&("app;main;sys_read;copy_user", 25)));
        assert!(f.contains(&("app;libc.so.6+0x1f2e", 4)));
        assert!(f.contains(&("app;[unknown]", 1)));
        assert_eq!(a.folded.iter().map(|f| f.samples).sum::<u64>(), 100);
    }

    #[test]
    fn folded_over_the_limit_keeps_the_sample_total() {
        let limits = Limits {
            folded: 1,
            ..Limits::default()
        };
        let a = aggregate(&fixture(), limits);
        assert_eq!(a.folded.len(), 2);
        assert_eq!(a.folded[1].stack, "[other stacks]");
        assert_eq!(a.folded.iter().map(|f| f.samples).sum::<u64>(), 100);
    }

    #[test]
    fn separators_in_names_cannot_break_the_folded_format() {
        let s = vec![st("a;b", &[("x", "weird;name\n")], 1, 0)];
        let a = aggregate(&s, Limits::default());
        assert_eq!(a.folded[0].stack, "a:b;weird:name:");
    }

    #[test]
    fn no_samples_gives_an_empty_profile() {
        let a = aggregate(&[], Limits::default());
        assert_eq!(a, Aggregated::default());
    }
}
