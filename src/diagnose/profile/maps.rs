//! Which file (and offset in it) a user-space address of a process maps
//! to: from `/proc/PID/maps` when a process is first seen and from the
//! kernel's MMAP2 records while sampling, so processes that exit before the
//! profile is symbolised still resolve.

use std::collections::HashMap;

/// One executable mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// File offset of `start`.
    pub(crate) pgoff: u64,
    /// Index into `Files`.
    pub(crate) file: u32,
}

/// Interned file names ("/usr/lib/libc.so.6", "[vdso]"…).
#[derive(Debug, Default)]
pub(crate) struct Files {
    pub(crate) names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Files {
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        if let Some(i) = self.index.get(name) {
            return *i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }
}

/// The executable mappings of one process, in the order they were learnt.
#[derive(Debug, Clone, Default)]
pub(crate) struct AddressSpace {
    maps: Vec<Mapping>,
    /// /proc/PID/maps was read (or tried) once already.
    pub(crate) proc_read: bool,
}

impl AddressSpace {
    /// Newer mappings shadow older ones over the same addresses (mmap over
    /// an old range, exec), so they are searched first.
    pub(crate) fn add(&mut self, m: Mapping) {
        if !self.maps.contains(&m) {
            self.maps.push(m);
        }
    }

    /// Older mappings (from /proc at first sight) go below the newer ones
    /// already learnt from MMAP2 records.
    pub(crate) fn add_older(&mut self, older: Vec<Mapping>) {
        let mut all = older;
        all.retain(|m| !self.maps.contains(m));
        all.append(&mut self.maps);
        self.maps = all;
    }

    /// exec replaced the whole address space.
    pub(crate) fn clear(&mut self) {
        self.maps.clear();
    }

    /// (file, file offset) of an address.
    pub(crate) fn lookup(&self, addr: u64) -> Option<(u32, u64)> {
        self.maps
            .iter()
            .rev()
            .find(|m| m.start <= addr && addr < m.end)
            .map(|m| (m.file, addr - m.start + m.pgoff))
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.maps.len()
    }
}

/// The executable, named mappings of a `/proc/PID/maps` text.
/// Anonymous executable memory (JIT code) has no file to symbolise from and
/// is left out: its addresses come out unresolved.
pub(crate) fn parse_proc_maps(text: &str, files: &mut Files) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        // 7f12a000-7f12c000 r-xp 00002000 08:01 1234   /usr/lib/x.so
        let mut it = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(off), Some(_dev), Some(_ino)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let path = it.next().unwrap_or("").trim();
        if !perms.contains('x') || path.is_empty() {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(pgoff)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        let path = path.strip_suffix(" (deleted)").unwrap_or(path);
        out.push(Mapping {
            start,
            end,
            pgoff,
            file: files.intern(path),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a20000 r--p 00000000 fe:00 123  /usr/bin/prog
55d0c0a20000-55d0c0a80000 r-xp 00020000 fe:00 123  /usr/bin/prog
7f0000000000-7f0000100000 rw-p 00000000 00:00 0 
7f1000028000-7f100019d000 r-xp 00028000 fe:00 456  /usr/lib/x86_64-linux-gnu/libc.so.6
7f2000000000-7f2000001000 rwxp 00000000 00:00 0 
7ffd1000a000-7ffd1000c000 r-xp 00000000 00:00 0  [vdso]
7ffd2000a000-7ffd2000c000 r-xp 00000000 fe:00 9  /tmp/gone (deleted)
garbage line
";

    #[test]
    fn parses_executable_named_mappings_only() {
        let mut files = Files::default();
        let m = parse_proc_maps(MAPS, &mut files);
        let names: Vec<&str> = m
            .iter()
            .map(|m| files.names[m.file as usize].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "/usr/bin/prog",
                "/usr/lib/x86_64-linux-gnu/libc.so.6",
                "[vdso]",
                "/tmp/gone"
            ]
        );
        assert_eq!(m[0].pgoff, 0x20000);
    }

    #[test]
    fn lookup_gives_file_offsets() {
        let mut files = Files::default();
        let mut a = AddressSpace::default();
        a.add_older(parse_proc_maps(MAPS, &mut files));
        let (f, off) = a.lookup(0x55d0c0a20010).unwrap();
        assert_eq!(files.names[f as usize], "/usr/bin/prog");
        assert_eq!(off, 0x20010);
        let (f, off) = a.lookup(0x7f1000028000 + 0x100).unwrap();
        assert_eq!(
            files.names[f as usize],
            "/usr/lib/x86_64-linux-gnu/libc.so.6"
        );
        assert_eq!(off, 0x28100);
        // Data and anonymous executable memory do not resolve.
        assert_eq!(a.lookup(0x7f0000000010), None);
        assert_eq!(a.lookup(0x7f2000000010), None);
        assert_eq!(a.lookup(0x10), None);
    }

    #[test]
    fn newer_mappings_shadow_older_ones() {
        let mut files = Files::default();
        let old = files.intern("/old");
        let new = files.intern("/new");
        let mut a = AddressSpace::default();
        a.add(Mapping {
            start: 0x1000,
            end: 0x3000,
            pgoff: 0,
            file: new,
        });
        // /proc read later still ranks below the record learnt first.
        a.add_older(vec![Mapping {
            start: 0x1000,
            end: 0x5000,
            pgoff: 0,
            file: old,
        }]);
        assert_eq!(a.lookup(0x2000), Some((new, 0x1000)));
        assert_eq!(a.lookup(0x4000), Some((old, 0x3000)));
        a.clear();
        assert_eq!(a.len(), 0);
        assert_eq!(a.lookup(0x2000), None);
    }
}
