//! Addresses to names: kernel addresses from /proc/kallsyms (streamed, see
//! `kallsyms`), user addresses as (file, offset) with blazesym from each
//! binary's ELF symbols (and DWARF with feature `profile-dwarf`). Each distinct address is resolved
//! once, in one batch per file.
//!
//! libc: dlsym, RTLD_DEFAULT (tests: where the C library's own functions are loaded)

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};

use super::aggregate::{Frame, Stack};
use super::collected::{Collected, FrameKey};
use super::kallsyms::KernelSym;

fn image_name(path: &str) -> String {
    if path.starts_with('[') {
        return path.to_string();
    }
    path.rsplit('/').next().unwrap_or(path).to_string()
}

fn hex(addr: u64) -> String {
    format!("{addr:#x}")
}

/// Kernel symbols: "[kernel]", or "[kernel.module]" with the module named.
fn kernel_frames(addrs: &[u64], names: &HashMap<u64, KernelSym>) -> HashMap<u64, Frame> {
    addrs
        .iter()
        .map(|&a| {
            let f = match names.get(&a) {
                Some(KernelSym {
                    name,
                    module: Some(m),
                }) => Frame::new("[kernel.module]", &format!("{name} [{m}]")),
                Some(s) => Frame::new("[kernel]", &s.name),
                None => Frame::new("[kernel]", &hex(a)),
            };
            (a, f)
        })
        .collect()
}

fn sym_name(s: &Symbolized) -> Option<String> {
    match s {
        Symbolized::Sym(s) => Some(s.name.to_string()),
        Symbolized::Unknown(_) => None,
    }
}

/// Where distributions put separate debug files (Debian's libc6-dbg,
/// Fedora's debuginfo): `<dir>/.build-id/ab/cdef….debug`.
const DEBUG_DIRS: &[&str] = &["/usr/lib/debug", "/usr/local/lib/debug"];

/// The separate debug file of `path`, by its build-id, if installed.
fn debug_file(path: &str) -> Option<PathBuf> {
    let id = blazesym::helper::read_elf_build_id(&path).ok()??;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    if hex.len() < 3 {
        return None;
    }
    DEBUG_DIRS
        .iter()
        .map(|d| PathBuf::from(format!("{d}/.build-id/{}/{}.debug", &hex[..2], &hex[2..])))
        .find(|p| p.is_file())
}

/// An ELF file's PT_LOAD segments: (file offset, virtual address, file
/// size); empty when it cannot be read.
fn load_segments(path: &str) -> Vec<(u64, u64, u64)> {
    use std::io::Read;
    // The headers sit at the file's start: the first 64 KiB hold them.
    let mut b = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(64 << 10).read_to_end(&mut b));
    if read.is_err() {
        return Vec::new();
    }
    if b.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Vec::new();
    }
    let (wide, le) = (b.get(4) == Some(&2), b.get(5) != Some(&2));
    let num = |at: usize, n: usize| -> Option<u64> {
        let v = b.get(at..at + n)?;
        Some(v.iter().enumerate().fold(0u64, |a, (i, &x)| {
            a | (x as u64) << (8 * if le { i } else { n - 1 - i })
        }))
    };
    let w = if wide { 8 } else { 4 };
    let get = || -> Option<Vec<(u64, u64, u64)>> {
        let (phoff, at) = if wide {
            (num(0x20, 8)?, 0x36)
        } else {
            (num(0x1c, 4)?, 0x2a)
        };
        let (size, count) = (num(at, 2)? as usize, num(at + 2, 2)? as usize);
        let mut out = Vec::new();
        for i in 0..count {
            let h = phoff as usize + i * size;
            if num(h, 4)? != 1 {
                continue; // not PT_LOAD
            }
            let (off, vaddr) = (num(h + w, w)?, num(h + 2 * w, w)?);
            let filesz = if wide {
                num(h + 32, 8)?
            } else {
                num(h + 16, 4)?
            };
            out.push((off, vaddr, filesz));
        }
        Some(out)
    };
    get().unwrap_or_default()
}

fn user_frames(sym: &Symbolizer, path: &str, offsets: &[u64]) -> HashMap<u64, Frame> {
    let image = image_name(path);
    let mut names: Vec<Option<String>> = vec![None; offsets.len()];
    // [vdso], [vsyscall]: no file to read.
    if !path.starts_with('[') {
        let src = |debug_syms| {
            Source::Elf(Elf {
                path: PathBuf::from(path),
                debug_syms,
                ..Elf::new(path)
            })
        };
        let dwarf = cfg!(feature = "profile-dwarf");
        if let Ok(v) = sym.symbolize(&src(dwarf), Input::FileOffset(offsets)) {
            names = v.iter().map(sym_name).collect();
        }
        // Debug info that cannot be read (a separate debug file with
        // compressed sections, a truncated one) must not cost the ELF
        // symbols: retry what is missing without it.
        let missing: Vec<usize> = (0..offsets.len()).filter(|i| names[*i].is_none()).collect();
        if dwarf && !missing.is_empty() {
            let again: Vec<u64> = missing.iter().map(|i| offsets[*i]).collect();
            if let Ok(v) = sym.symbolize(&src(false), Input::FileOffset(&again)) {
                for (k, i) in missing.iter().enumerate() {
                    names[*i] = v.get(k).and_then(sym_name);
                }
            }
        }
        // A stripped library's hidden functions (glibc's
        // __pthread_clockjoin_ex, __lll_lock_wait) are in no .dynsym; its
        // separate debug file, found by build-id, keeps the whole .symtab
        // uncompressed even when its DWARF is compressed.
        let missing: Vec<usize> = (0..offsets.len()).filter(|i| names[*i].is_none()).collect();
        if let (false, Some(debug)) = (missing.is_empty(), debug_file(path)) {
            // The debug file's program headers describe no file contents:
            // file offsets become addresses by the library's own.
            let loads = load_segments(path);
            let (idx, virt): (Vec<usize>, Vec<u64>) = missing
                .iter()
                .filter_map(|&i| {
                    let off = offsets[i];
                    loads
                        .iter()
                        .find(|(o, _, n)| (*o..o + n).contains(&off))
                        .map(|(o, v, _)| (i, off - o + v))
                })
                .unzip();
            let src = Source::Elf(Elf {
                debug_syms: false,
                ..Elf::new(debug)
            });
            if let Ok(v) = sym.symbolize(&src, Input::VirtOffset(&virt)) {
                for (k, i) in idx.iter().enumerate() {
                    names[*i] = v.get(k).and_then(sym_name);
                }
            }
        }
    }
    offsets
        .iter()
        .zip(names)
        .map(|(&off, name)| {
            let f = match name {
                Some(n) => Frame::new(&image, &n),
                None => Frame::new(&image, &hex(off)),
            };
            (off, f)
        })
        .collect()
}

/// The kernel addresses of the collected stacks.
pub(super) fn kernel_addrs(c: &Collected) -> impl Iterator<Item = u64> + '_ {
    c.stacks.keys().flat_map(|(_, frames)| {
        frames.iter().filter_map(|f| match f {
            FrameKey::Kernel(a) => Some(*a),
            _ => None,
        })
    })
}

/// The collected stacks with names, for aggregation; kernel addresses from
/// `names` (read for all profiles at once, `kallsyms::resolve`).
pub(super) fn resolve(c: &Collected, names: &HashMap<u64, KernelSym>) -> Vec<Stack> {
    let sym = Symbolizer::builder()
        .enable_code_info(false)
        .enable_inlined_fns(false)
        .enable_demangling(true)
        .build();
    let mut kernel: HashSet<u64> = HashSet::new();
    let mut per_file: HashMap<u32, HashSet<u64>> = HashMap::new();
    let mut callers: HashMap<u32, Vec<u64>> = HashMap::new();
    for (_, frames) in c.stacks.keys() {
        for f in frames {
            match *f {
                FrameKey::Kernel(a) => {
                    kernel.insert(a);
                }
                FrameKey::User(file, off) => {
                    per_file.entry(file).or_default().insert(off);
                }
                FrameKey::Caller(file, off) => {
                    per_file.entry(file).or_default().insert(off);
                    callers.entry(file).or_default().push(off);
                }
                FrameKey::Unmapped(..) => {}
            }
        }
    }
    let mut calls: HashSet<(u32, u64)> = HashSet::new();
    for (file, mut offs) in callers {
        offs.sort_unstable();
        offs.dedup();
        let path = &c.files.names[file as usize];
        calls.extend(
            super::callsite::follow_calls(path, &offs)
                .into_iter()
                .map(|o| (file, o)),
        );
    }
    let mut kaddrs: Vec<u64> = kernel.into_iter().collect();
    kaddrs.sort_unstable();
    let kmap = kernel_frames(&kaddrs, names);
    let mut umap: HashMap<u32, HashMap<u64, Frame>> = HashMap::new();
    for (file, offs) in per_file {
        let mut offs: Vec<u64> = offs.into_iter().collect();
        offs.sort_unstable();
        let path = &c.files.names[file as usize];
        umap.insert(file, user_frames(&sym, path, &offs));
    }
    let user = |file: u32, off: u64| {
        umap.get(&file)
            .and_then(|m| m.get(&off))
            .cloned()
            .unwrap_or_else(|| Frame::new("[unknown]", &hex(off)))
    };
    c.stacks
        .iter()
        .map(|((comm, keys), (samples, ksamples))| Stack {
            comm: c.comms.get(*comm as usize).cloned().unwrap_or_default(),
            frames: keep_callers(
                keys.iter()
                    .map(|k| match *k {
                        FrameKey::Kernel(a) => (
                            kmap.get(&a)
                                .cloned()
                                .unwrap_or_else(|| Frame::new("[kernel]", &hex(a))),
                            None,
                        ),
                        FrameKey::User(file, off) => (user(file, off), None),
                        FrameKey::Caller(file, off) => {
                            (user(file, off), Some(calls.contains(&(file, off))))
                        }
                        FrameKey::Unmapped(_, a) => (Frame::new("[unknown]", &hex(a)), None),
                    })
                    .collect(),
            ),
            kernel_samples: *ksamples,
            samples: *samples,
        })
        .collect()
}

/// Frames named; a leaf's caller candidate (`FrameKey::Caller`) comes with
/// whether it follows a call instruction, and stands only then, with a
/// name, and when it is not its neighbour's function again (a leaf with a
/// frame of its own, or a stale link register pointing back into the leaf).
fn keep_callers(named: Vec<(Frame, Option<bool>)>) -> Vec<Frame> {
    let same = |i: usize, f: &Frame| named.get(i).is_some_and(|(g, _)| g == f);
    let keep: Vec<bool> = named
        .iter()
        .enumerate()
        .map(|(i, (f, call))| match call {
            None => true,
            Some(ok) => {
                let twin = same(i + 1, f) || (i > 0 && same(i - 1, f));
                *ok && !f.symbol.starts_with("0x") && !twin
            }
        })
        .collect();
    named
        .into_iter()
        .zip(keep)
        .filter_map(|((f, _), k)| k.then_some(f))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    #[no_mangle]
    pub(crate) extern "C" fn tunelab_symbol_probe_fn(x: u64) -> u64 {
        std::hint::black_box(x.wrapping_mul(31).rotate_left(7))
    }

    /// The file and file offset of an address of this process, from its
    /// /proc/self/maps (the path a sampled address takes).
    fn file_offset_of(addr: u64) -> (String, u64) {
        let mut files = super::super::maps::Files::default();
        let text = crate::system::proc::read("self/maps").unwrap();
        let mut sp = super::super::maps::AddressSpace::default();
        sp.add_older(super::super::maps::parse_proc_maps(&text, &mut files));
        let (f, off) = sp.lookup(addr).expect("own code is mapped");
        (files.names[f as usize].clone(), off)
    }

    #[test]
    fn a_known_function_of_this_test_binary_resolves_by_name() {
        let addr = tunelab_symbol_probe_fn as *const () as usize as u64;
        assert_eq!(tunelab_symbol_probe_fn(1), tunelab_symbol_probe_fn(1));
        let (path, off) = file_offset_of(addr + 2);
        let sym = Symbolizer::new();
        let m = user_frames(&sym, &path, &[off]);
        let f = &m[&off];
        assert_eq!(f.symbol, "tunelab_symbol_probe_fn", "{f:?} in {path}");
        assert_eq!(f.image, image_name(&path));
    }

    #[test]
    fn shared_library_functions_resolve_from_dynsym() {
        // libc's own getpid, not a PLT stub: dlsym gives the address in libc.
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
        let addr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"getpid".as_ptr()) } as u64;
        assert_ne!(addr, 0);
        let (path, off) = file_offset_of(addr + 1);
        assert!(path.contains("libc"), "{path}");
        let m = user_frames(&Symbolizer::new(), &path, &[off]);
        assert!(m[&off].symbol.contains("getpid"), "{:?} in {path}", m[&off]);
    }

    #[test]
    fn hidden_library_functions_resolve_from_the_debug_file() {
        // pthread_join is a 15-byte stub that jumps to the hidden
        // __pthread_clockjoin_ex, where a join's futex wait sits: named only
        // by the .symtab of libc's separate debug file (libc6-dbg).
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
        let addr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"pthread_join".as_ptr()) } as u64;
        assert_ne!(addr, 0);
        let (path, _) = file_offset_of(addr);
        let Some(debug) = debug_file(&path) else {
            eprintln!("skipped: no separate debug file for {path} (libc6-dbg)");
            return;
        };
        // Its file offset in libc: the debug file's address, shifted as
        // libc's own exported pthread_join is (the same text segment).
        use blazesym::inspect::{source, Inspector};
        let inspector = Inspector::new();
        let first = |file: &std::path::Path, name: &str| {
            let src = source::Source::Elf(source::Elf::new(file));
            let v = inspector.lookup(&src, &[name]).ok()?;
            let s = v.first()?.first()?;
            Some((s.addr, s.file_offset?))
        };
        let (Some((join_addr, join_off)), Some((hidden, _))) = (
            first(std::path::Path::new(&path), "pthread_join"),
            first(&debug, "__pthread_clockjoin_ex"),
        ) else {
            eprintln!("skipped: {} has no __pthread_clockjoin_ex", debug.display());
            return;
        };
        let off = hidden - (join_addr - join_off);
        let m = user_frames(&Symbolizer::new(), &path, &[off + 4]);
        assert_eq!(m[&(off + 4)].symbol, "__pthread_clockjoin_ex", "in {path}");
    }

    #[test]
    fn a_leaf_caller_stands_after_a_call_and_between_other_functions() {
        let f = |s: &str| Frame::new("prog", s);
        let names = |v: Vec<Frame>| v.into_iter().map(|f| f.symbol).collect::<Vec<_>>();
        // memcpy's caller, skipped by the frame-pointer chain, comes back.
        let got = keep_callers(vec![
            (f("memcpy"), None),
            (f("copy_blocks"), Some(true)),
            (f("main"), None),
        ]);
        assert_eq!(names(got), ["memcpy", "copy_blocks", "main"]);
        // Not after a call, a stale link register into the leaf, the
        // chain's own next frame again, or no name: dropped.
        for (cand, call) in [
            ("main_loop", false),
            ("memcpy", true),
            ("main", true),
            ("0x4011", true),
        ] {
            let got = keep_callers(vec![
                (f("memcpy"), None),
                (f(cand), Some(call)),
                (f("main"), None),
            ]);
            assert_eq!(names(got), ["memcpy", "main"], "{cand}");
        }
        // Recursion in the chain itself stays.
        let got = keep_callers(vec![(f("walk"), None), (f("walk"), None)]);
        assert_eq!(names(got), ["walk", "walk"]);
    }

    #[test]
    fn a_missing_file_leaves_addresses_unresolved_in_hex() {
        let sym = Symbolizer::new();
        let m = user_frames(&sym, "/nonexistent/libx.so", &[0x1234]);
        assert_eq!(m[&0x1234], Frame::new("libx.so", "0x1234"));
        let m = user_frames(&sym, "[vdso]", &[0x10]);
        assert_eq!(m[&0x10], Frame::new("[vdso]", "0x10"));
    }

    #[test]
    fn kernel_addresses_resolve_from_kallsyms_when_readable() {
        // A kernel text symbol's address from kallsyms itself; with
        // kptr_restrict addresses read as 0 and nothing can resolve.
        let text = crate::system::proc::read("kallsyms").unwrap_or_default();
        let hit = text.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            let (a, t, n) = (it.next()?, it.next()?, it.next()?);
            let a = u64::from_str_radix(a, 16).ok()?;
            (a != 0 && (t == "T" || t == "t") && n == "schedule").then_some(a)
        });
        let Some(addr) = hit else {
            eprintln!("skipped: /proc/kallsyms has no readable address for `schedule`");
            return;
        };
        let names = super::super::kallsyms::resolve(&[addr + 1]);
        let m = kernel_frames(&[addr + 1], &names);
        assert_eq!(m[&(addr + 1)], Frame::new("[kernel]", "schedule"));
    }
}
