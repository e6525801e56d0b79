//! Kernel addresses to names from /proc/kallsyms in two streaming passes,
//! keeping only what the sampled addresses need. A kernel has 100–200 k
//! symbols (5 MB of text): loading them all as a table (what blazesym's
//! kernel source does, ~10 MB at its peak) is more than a 64 MiB board has
//! free after a profile, and the OOM killer ended `diagnose` there. Pass 1
//! finds, for each sampled address, the line of its symbol (memory in
//! proportion to the samples); pass 2 reads the names on those lines.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};

/// What an address resolved to: the function and, for a module's code,
/// the module's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KernelSym {
    pub name: String,
    pub module: Option<String>,
}

/// Only code can be a sampled instruction pointer or a return address:
/// text symbols (`t`/`T`, weak `w`/`W` definitions).
fn is_text(kind: &str) -> bool {
    matches!(kind, "t" | "T" | "w" | "W")
}

/// `ffffffff81000000 T _stext` or `… t fn [module]`: address, type, name,
/// module.
fn fields(line: &str) -> Option<(u64, &str, &str, Option<&str>)> {
    let mut it = line.split_ascii_whitespace();
    let addr = u64::from_str_radix(it.next()?, 16).ok()?;
    let kind = it.next()?;
    let name = it.next()?;
    let module = it
        .next()
        .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'));
    Some((addr, kind, name, module))
}

/// Resolves `addrs` against the kallsyms text that `open` yields (called
/// twice: once per pass). An address resolves to the text symbol at or
/// below it; addresses below the first symbol, or with every symbol
/// reading 0 (kptr_restrict), resolve to nothing.
pub(super) fn resolve_with<R: Read>(
    mut open: impl FnMut() -> std::io::Result<R>,
    addrs: &[u64],
) -> HashMap<u64, KernelSym> {
    let mut out = HashMap::new();
    if addrs.is_empty() {
        return out;
    }
    // Pass 1: for each sampled address, the line of the closest text
    // symbol at or below it, in memory proportional to the samples, not to
    // the kernel. kallsyms is ascending in runs (the kernel image, then each
    // module): inside a run a symbol covers up to the next one; the last of
    // a run covers everything above it, until a closer symbol claims it.
    let mut addrs: Vec<u64> = addrs.to_vec();
    addrs.sort_unstable();
    addrs.dedup();
    // (symbol address, line) per address; line u32::MAX = none yet.
    let mut best: Vec<(u64, u32)> = vec![(0, u32::MAX); addrs.len()];
    let mut claim = |lo: u64, hi: Option<u64>, cand: (u64, u32)| {
        let from = addrs.partition_point(|&a| a < lo);
        let to = hi.map_or(addrs.len(), |h| addrs.partition_point(|&a| a < h));
        for b in &mut best[from..to.max(from)] {
            if b.1 == u32::MAX || cand.0 > b.0 {
                *b = cand;
            }
        }
    };
    let Ok(r) = open() else { return out };
    let mut prev: Option<(u64, u32)> = None;
    for (i, line) in BufReader::with_capacity(16 << 10, r).lines().enumerate() {
        let Ok(line) = line else { break };
        let Some((a, kind, _, _)) = fields(&line) else {
            continue;
        };
        if a == 0 || !is_text(kind) {
            continue;
        }
        match prev {
            Some(p) if a >= p.0 => claim(p.0, Some(a), p),
            Some(p) => claim(p.0, None, p),
            None => {}
        }
        prev = Some((a, i as u32));
    }
    if let Some(p) = prev {
        claim(p.0, None, p);
    }
    // The line each address falls into.
    let mut wanted: HashMap<u32, Vec<u64>> = HashMap::new();
    for (a, b) in addrs.iter().zip(&best) {
        if b.1 != u32::MAX {
            wanted.entry(b.1).or_default().push(*a);
        }
    }
    if wanted.is_empty() {
        return out;
    }
    // Pass 2: the names on those lines.
    let Ok(r) = open() else { return out };
    for (i, line) in BufReader::with_capacity(16 << 10, r).lines().enumerate() {
        let Ok(line) = line else { break };
        let Some(these) = wanted.remove(&(i as u32)) else {
            continue;
        };
        if let Some((_, _, name, module)) = fields(&line) {
            let sym = KernelSym {
                name: name.to_string(),
                module: module.map(str::to_string),
            };
            for a in these {
                out.insert(a, sym.clone());
            }
        }
        if wanted.is_empty() {
            break;
        }
    }
    out
}

/// [`resolve_with`] over this machine's /proc/kallsyms.
pub(super) fn resolve(addrs: &[u64]) -> HashMap<u64, KernelSym> {
    resolve_with(|| std::fs::File::open("/proc/kallsyms"), addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff81000100 t helper
ffffffff81000200 D some_data
ffffffff81000300 T schedule
ffffffffc0001000 t usb_probe\t[usbcore]
ffffffff81000180 W weak_fn
";

    fn run(addrs: &[u64]) -> HashMap<u64, KernelSym> {
        resolve_with(|| Ok(TEXT.as_bytes()), addrs)
    }

    fn sym(name: &str, module: Option<&str>) -> KernelSym {
        KernelSym {
            name: name.into(),
            module: module.map(Into::into),
        }
    }

    #[test]
    fn an_address_resolves_to_the_text_symbol_at_or_below_it() {
        let m = run(&[0xffffffff81000100, 0xffffffff81000150, 0xffffffff81000350]);
        assert_eq!(m[&0xffffffff81000100], sym("helper", None));
        assert_eq!(m[&0xffffffff81000150], sym("helper", None));
        assert_eq!(m[&0xffffffff81000350], sym("schedule", None));
    }

    #[test]
    fn data_symbols_are_skipped_and_unsorted_lines_are_handled() {
        // 0x250 is past the data symbol at 0x200: still the weak fn at 0x180,
        // which comes last in the file.
        let m = run(&[0xffffffff81000250]);
        assert_eq!(m[&0xffffffff81000250], sym("weak_fn", None));
    }

    #[test]
    fn module_code_names_its_module() {
        let m = run(&[0xffffffffc0001010]);
        assert_eq!(m[&0xffffffffc0001010], sym("usb_probe", Some("usbcore")));
    }

    #[test]
    fn below_the_first_symbol_or_with_hidden_addresses_nothing_resolves() {
        assert!(run(&[0x1000]).is_empty());
        let hidden = "0000000000000000 T _stext\n0000000000000000 T schedule\n";
        let m = resolve_with(|| Ok(hidden.as_bytes()), &[0xffffffff81000300]);
        assert!(m.is_empty());
    }

    #[test]
    fn an_unreadable_file_resolves_nothing() {
        let m = resolve_with(
            || Err::<&[u8], _>(std::io::Error::other("denied")),
            &[0xffffffff81000300],
        );
        assert!(m.is_empty());
    }

    #[test]
    fn this_machines_kallsyms_resolves_as_a_whole_table_would() {
        // Every 500th text symbol's address + 1, against a brute-force
        // search of the whole table (skipped when addresses are hidden).
        let text = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let table: Vec<(u64, &str)> = text
            .lines()
            .filter_map(|l| {
                let (a, k, n, _) = fields(l)?;
                (a != 0 && is_text(k)).then_some((a, n))
            })
            .collect();
        if table.len() < 1000 {
            eprintln!("skipped: /proc/kallsyms shows no addresses here");
            return;
        }
        let probes: Vec<u64> = table.iter().step_by(500).map(|s| s.0 + 1).collect();
        let got = resolve(&probes);
        for a in probes {
            let want = table
                .iter()
                .filter(|s| s.0 <= a)
                .map(|s| s.0)
                .max()
                .unwrap();
            let names: Vec<&str> = table.iter().filter(|s| s.0 == want).map(|s| s.1).collect();
            assert!(
                names.contains(&got[&a].name.as_str()),
                "{a:#x}: {:?} vs {names:?}",
                got[&a]
            );
        }
    }
}
