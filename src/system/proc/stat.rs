//! `/proc/PID/stat` and `/proc/PID/task/TID/stat`: the one parser of the
//! line. It borrows the text instead of building procfs's `Stat` (which
//! reads into a fresh buffer and copies the command name on every parse),
//! because the hogs and blocking scans run it for every task at every
//! interval and their budget allows no allocation per task.

/// Most fields kept after the command name (the kernel prints 50 today;
/// later ones are ignored).
const MAX: usize = 64;

/// One stat line, split. Fields are numbered as in proc(5): 1 is the pid,
/// 2 the command name, 3 the state, 14 utime, 22 starttime, ...
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat<'a> {
    /// The command name: between the first '(' and the last ')' (it may
    /// hold spaces and parentheses itself).
    pub(crate) comm: &'a str,
    rest: [&'a str; MAX],
    n: usize,
}

impl<'a> Stat<'a> {
    /// Split a stat line; None without the ')' that closes the name.
    pub(crate) fn parse(text: &'a str) -> Option<Stat<'a>> {
        let close = text.rfind(')')?;
        let comm = text[..close]
            .find('(')
            .map_or("", |open| &text[open + 1..close]);
        let mut rest = [""; MAX];
        let mut n = 0;
        for (slot, w) in rest
            .iter_mut()
            .zip(text[close + 1..].split_ascii_whitespace())
        {
            *slot = w;
            n += 1;
        }
        Some(Stat { comm, rest, n })
    }

    /// Field `n` (proc(5) numbering, from 3) as text.
    pub(crate) fn field(&self, n: usize) -> Option<&'a str> {
        let i = n.checked_sub(3)?;
        (i < self.n).then(|| self.rest[i])
    }

    /// Field `n` as an unsigned number.
    pub(crate) fn u64(&self, n: usize) -> Option<u64> {
        self.field(n)?.parse().ok()
    }

    /// Field `n` as a signed number (cutime and cstime are signed).
    pub(crate) fn i64(&self, n: usize) -> Option<i64> {
        self.field(n)?.parse().ok()
    }

    /// Field 3: R, S, D, Z, ...
    pub(crate) fn state(&self) -> Option<char> {
        self.field(3)?.chars().next()
    }

    /// Field 4.
    pub(crate) fn ppid(&self) -> Option<i32> {
        self.field(4)?.parse().ok()
    }

    /// Field 9: PF_* flags.
    pub(crate) fn flags(&self) -> Option<u64> {
        self.u64(9)
    }

    /// Field 10.
    pub(crate) fn minflt(&self) -> Option<u64> {
        self.u64(10)
    }

    /// Field 12.
    pub(crate) fn majflt(&self) -> Option<u64> {
        self.u64(12)
    }

    /// Field 14, in clock ticks.
    pub(crate) fn utime(&self) -> Option<u64> {
        self.u64(14)
    }

    /// Field 15, in clock ticks.
    pub(crate) fn stime(&self) -> Option<u64> {
        self.u64(15)
    }

    /// Fields 14 to 17: utime + stime + cutime + cstime, clamped at 0.
    pub(crate) fn ticks_with_children(&self) -> Option<u64> {
        let sum = self.i64(14)? + self.i64(15)? + self.i64(16)? + self.i64(17)?;
        Some(sum.max(0) as u64)
    }

    /// Field 22: start time after boot, in clock ticks.
    pub(crate) fn starttime(&self) -> Option<u64> {
        self.u64(22)
    }

    /// Field 40.
    pub(crate) fn rt_priority(&self) -> Option<u32> {
        self.field(40)?.parse().ok()
    }

    /// Field 41: SCHED_* policy number.
    pub(crate) fn policy(&self) -> Option<u32> {
        self.field(41)?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 6.x kernel's line for a task whose name holds ") (".
    const LINE: &str = "42 (we ird) (x) S 7 42 42 0 -1 4194560 1500 0 3 0 250 40 5 -2 20 0 1 0 \
         5555 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 99 1 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn fields_are_numbered_as_in_proc5() {
        let s = Stat::parse(LINE).unwrap();
        assert_eq!(s.comm, "we ird) (x");
        assert_eq!(s.state(), Some('S'));
        assert_eq!(s.ppid(), Some(7));
        assert_eq!(s.flags(), Some(4194560));
        assert_eq!((s.minflt(), s.majflt()), (Some(1500), Some(3)));
        assert_eq!((s.utime(), s.stime()), (Some(250), Some(40)));
        assert_eq!(s.ticks_with_children(), Some(250 + 40 + 5 - 2));
        assert_eq!(s.starttime(), Some(5555));
        assert_eq!(s.u64(39), Some(3), "processor");
        assert_eq!((s.rt_priority(), s.policy()), (Some(99), Some(1)));
        assert_eq!(s.field(52), Some("0"));
        assert_eq!(s.field(53), None);
        assert_eq!(s.field(2), None);
    }

    #[test]
    fn short_or_garbled_lines_give_none_not_a_panic() {
        assert!(Stat::parse("garbage").is_none());
        let s = Stat::parse("1 (x) S 1 2").unwrap();
        assert_eq!(s.utime(), None);
        assert_eq!(s.starttime(), None);
        let s = Stat::parse("1 (x) S -1 0 0 0 0 -5 0 0 0 0 -9 -9 0 0").unwrap();
        assert_eq!(s.flags(), None, "a negative number is not a flag word");
        assert_eq!(s.ticks_with_children(), Some(0), "clamped at 0");
        // No '(' at all: the name is empty, the fields still follow ')'.
        assert_eq!(Stat::parse("1 x) R 1").unwrap().comm, "");
    }

    #[test]
    fn this_process_reads_itself() {
        // The reading thread itself is running; the process's main thread
        // (what "self" shows) may be waiting for the test threads.
        let text = super::super::read_pid("thread-self", "stat").unwrap();
        let s = Stat::parse(&text).unwrap();
        assert_eq!(s.state(), Some('R'));
        assert!(s.starttime().is_some());
    }
}
