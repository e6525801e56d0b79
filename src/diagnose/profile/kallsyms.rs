//! Kernel addresses to names from /proc/kallsyms in two streaming passes,
//! keeping only what the sampled addresses need. A kernel has 100–200 k
//! symbols (5 MB of text): loading them all as a table (what blazesym's
//! kernel source does, ~10 MB at its peak) is more than a 64 MiB board has
//! free after a profile, and the OOM killer ended `diagnose` there. Pass 1
//! keeps each text symbol's address and line number (12 bytes a symbol);
//! pass 2 reads the names of the few lines the samples fell into.

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
    // Pass 1: (address, line number) of every text symbol.
    let mut table: Vec<(u64, u32)> = Vec::new();
    let Ok(r) = open() else { return out };
    for (i, line) in BufReader::with_capacity(64 << 10, r).lines().enumerate() {
        let Ok(line) = line else { break };
        if let Some((a, kind, _, _)) = fields(&line) {
            if a != 0 && is_text(kind) {
                table.push((a, i as u32));
            }
        }
    }
    if table.is_empty() {
        return out;
    }
    table.sort_unstable();
    // The line each address falls into.
    let mut wanted: HashMap<u32, Vec<u64>> = HashMap::new();
    for &a in addrs {
        let at = table.partition_point(|&(s, _)| s <= a);
        if at > 0 {
            wanted.entry(table[at - 1].1).or_default().push(a);
        }
    }
    drop(table);
    // Pass 2: the names on those lines.
    let Ok(r) = open() else { return out };
    for (i, line) in BufReader::with_capacity(64 << 10, r).lines().enumerate() {
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
}
