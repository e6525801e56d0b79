//! Kernel addresses to names from /proc/kallsyms in one streaming pass,
//! keeping only what the sampled addresses need. A kernel has 100–200 k
//! symbols (5 MB of text): loading them all as a table (what blazesym's
//! kernel source does, ~10 MB at its peak) is more than a 64 MiB board has
//! free after a profile, and the OOM killer ended `diagnose` there. Each
//! sampled address keeps the closest symbol seen so far (memory in
//! proportion to the samples); the kernel generates the file's text on
//! every read, so it is read once per diagnosis, for all its profiles
//! together (a slow board spent seconds reading it six times).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::rc::Rc;

/// What an address resolved to: the function and, for a module's code,
/// the module's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KernelSym {
    pub(crate) name: String,
    pub(crate) module: Option<String>,
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

/// Resolves `addrs` against the kallsyms text that `open` yields, read
/// once. An address resolves to the text symbol at or below it; addresses
/// below the first symbol, or with every symbol reading 0 (kptr_restrict),
/// resolve to nothing.
pub(super) fn resolve_with<R: Read>(
    open: impl FnOnce() -> std::io::Result<R>,
    addrs: &[u64],
) -> HashMap<u64, KernelSym> {
    let mut out = HashMap::new();
    if addrs.is_empty() {
        return out;
    }
    // kallsyms is ascending in runs (the kernel image, then each module):
    // inside a run a symbol covers up to the next one; the last of a run
    // covers everything above it, until a closer symbol claims it. A
    // symbol's name is made only when it claims an address.
    let mut addrs: Vec<u64> = addrs.to_vec();
    addrs.sort_unstable();
    addrs.dedup();
    let mut best: Vec<Option<(u64, Rc<KernelSym>)>> = vec![None; addrs.len()];
    let mut claim = |lo: u64, hi: Option<u64>, line: &str| {
        let from = addrs.partition_point(|&a| a < lo);
        let to = hi.map_or(addrs.len(), |h| addrs.partition_point(|&a| a < h));
        let mut sym: Option<Rc<KernelSym>> = None;
        for b in &mut best[from..to.max(from)] {
            if b.as_ref().is_some_and(|(at, _)| *at >= lo) {
                continue;
            }
            let Some(s) = sym.clone().or_else(|| {
                let (_, _, name, module) = fields(line)?;
                Some(Rc::new(KernelSym {
                    name: name.to_string(),
                    module: module.map(str::to_string),
                }))
            }) else {
                return;
            };
            sym = Some(s.clone());
            *b = Some((lo, s));
        }
    };
    let Ok(r) = open() else { return out };
    let mut r = BufReader::with_capacity(16 << 10, r);
    // The previous text symbol's line and address, and the line being read.
    let (mut prev, mut line) = (String::new(), String::new());
    let mut prev_at: Option<u64> = None;
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Some((a, kind, _, _)) = fields(&line) else {
            continue;
        };
        if a == 0 || !is_text(kind) {
            continue;
        }
        match prev_at {
            Some(p) if a >= p => claim(p, Some(a), &prev),
            Some(p) => claim(p, None, &prev),
            None => {}
        }
        prev_at = Some(a);
        std::mem::swap(&mut prev, &mut line);
    }
    if let Some(p) = prev_at {
        claim(p, None, &prev);
    }
    for (a, b) in addrs.iter().zip(best) {
        if let Some((_, s)) = b {
            out.insert(*a, Rc::unwrap_or_clone(s));
        }
    }
    out
}

/// [`resolve_with`] over this machine's /proc/kallsyms.
pub(super) fn resolve(addrs: &[u64]) -> HashMap<u64, KernelSym> {
    resolve_with(
        || std::fs::File::open(crate::system::proc::path("kallsyms")),
        addrs,
    )
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
    fn the_file_is_opened_once() {
        let mut opened = 0;
        let m = resolve_with(
            || {
                opened += 1;
                Ok(TEXT.as_bytes())
            },
            &[0xffffffff81000150, 0xffffffffc0001010],
        );
        assert_eq!(opened, 1);
        assert_eq!(m.len(), 2);
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
        let text = crate::system::proc::read("kallsyms").unwrap_or_default();
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
