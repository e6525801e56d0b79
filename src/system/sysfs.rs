//! Two readings of sysfs that the CPU and board descriptions share: the
//! kernel's CPU list format and numbered entries of a directory.

use std::fs;
use std::path::Path;

/// Expand a kernel CPU list ("0-3", "4 5", "0-1,4").
pub fn cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.split([',', ' ', '\n']).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<usize>().ok()),
        }
    }
    out
}

/// The names in `dir` that are `prefix` and a number, in numeric order
/// (policy0, policy4; thermal_zone2 before thermal_zone10).
pub fn sorted_entries(dir: &Path, prefix: &str) -> Vec<String> {
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
