//! Two readings of sysfs that the CPU and board descriptions share: the
//! kernel's CPU list format (the one parser of it; diagnose and the
//! environment snapshot read /sys/devices/system/cpu/online through it)
//! and numbered entries of a directory.

use std::fs;
use std::path::Path;

/// Most CPUs a list may name: more than any kernel's NR_CPUS, so a garbled
/// range cannot make a huge vector.
const MAX_CPUS: usize = 1 << 16;

/// Expand a CPU list in the kernel's format ("0-3", "4 5", "0-1,4\n"): the
/// one parser for /sys, /proc and the CPU lists users give. None when a
/// part is not a CPU number or a forward range.
pub(crate) fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(|c: char| c == ',' || c.is_whitespace()) {
        if part.is_empty() {
            continue;
        }
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
        if a > b || b >= MAX_CPUS {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// A list the kernel wrote, expanded; empty where it is not one.
pub(crate) fn cpu_list(s: &str) -> Vec<usize> {
    parse_cpu_list(s).unwrap_or_default()
}

/// The names in `dir` that are `prefix` and a number, in numeric order
/// (policy0, policy4; thermal_zone2 before thermal_zone10).
pub(crate) fn sorted_entries(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<(usize, String)> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| {
                let n = e.ok()?.file_name().to_string_lossy().into_owned();
                Some((n.strip_prefix(prefix)?.parse().ok()?, n))
            })
            .collect()
        })
        .unwrap_or_default();
    v.sort();
    v.into_iter().map(|e| e.1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_in_the_kernel_format() {
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("4 5\n"), Some(vec![4, 5]));
        assert_eq!(parse_cpu_list("0-1\n").map(|v| v.len()), Some(2));
        assert_eq!(parse_cpu_list("0-3,6,8-9").map(|v| v.len()), Some(7));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        // Not a list: nothing, rather than the parts that parsed.
        for bad in ["3-1", "x", "0,x", "1-", "0-99999999"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad}");
            assert!(cpu_list(bad).is_empty(), "{bad}");
        }
    }
}
