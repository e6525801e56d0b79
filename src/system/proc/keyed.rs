//! The "Key: value" files: /proc/PID/status, /proc/PID/io, /proc/PID/sched,
//! smaps_rollup and meminfo (the last through procfs's `Meminfo` where all
//! of it is wanted). Lookups scan the text once and allocate nothing.

/// The value text of the first line whose key (before ':', trimmed) is
/// `key`, trimmed.
pub(crate) fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// The first word of `key`'s value as a number ("Tgid:\t42", "syscr: 7",
/// "VmRSS:  100 kB" gives 100).
pub(crate) fn number(text: &str, key: &str) -> Option<u64> {
    field(text, key)?
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A "NNN kB" value in bytes.
pub(crate) fn kib_bytes(text: &str, key: &str) -> Option<u64> {
    number(text, key).map(|k| k * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tcat\nTgid:\t42\nVmRSS:\t    1200 kB\nThreads:\t1\n";
    const IO: &str = "rchar: 10\nwchar: 20\nsyscr: 3\nsyscw: 4\nread_bytes: 0\n";
    const SCHED: &str =
        "cat (42, #threads: 1)\n----\nse.nr_migrations                  :                    5\n";

    #[test]
    fn keys_match_whole_and_values_parse() {
        assert_eq!(field(STATUS, "Name"), Some("cat"));
        assert_eq!(number(STATUS, "Tgid"), Some(42));
        assert_eq!(kib_bytes(STATUS, "VmRSS"), Some(1200 * 1024));
        assert_eq!(number(IO, "wchar"), Some(20));
        assert_eq!(number(IO, "syscw"), Some(4));
        assert_eq!(number(IO, "char"), None, "a key is matched whole");
        assert_eq!(number(SCHED, "se.nr_migrations"), Some(5));
        assert_eq!(number(STATUS, "Name"), None, "not a number");
        assert_eq!(field("", "x"), None);
    }
}
