//! Ground truth: the flash methods on a simulated card of known geometry
//! (tests/common/flashsim.rs) with a virtual clock, at three geometries.
//! Deterministic: nothing here depends on the speed of the machine.

mod common;
#[path = "common/flashsim.rs"]
mod flashsim;

use flashsim::{Card, Geometry};
use tunelab::experiments::common::flash::{boundary, steady, streams, FlashIo};

const MIB: u64 = 1 << 20;
const CHUNK: u64 = 64 << 10;

struct Sim(Card);

impl FlashIo for Sim {
    fn len(&self) -> u64 {
        self.0.g.size
    }
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> tunelab::Result<()> {
        self.0.read(offset, buf.len() as u64);
        Ok(())
    }
    fn write_at(&mut self, buf: &[u8], offset: u64) -> tunelab::Result<()> {
        self.0.write(offset, buf.len() as u64);
        Ok(())
    }
    fn flush(&mut self) -> tunelab::Result<()> {
        self.0.flush();
        Ok(())
    }
    fn now(&self) -> f64 {
        self.0.now
    }
}

fn geometries() -> Vec<Geometry> {
    vec![
        Geometry::card(4 * MIB, 2, 64 * MIB),
        Geometry::card(8 * MIB, 4, 256 * MIB),
        Geometry::card(16 * MIB, 1, 0),
    ]
}

fn ok() -> tunelab::Result<()> {
    Ok(())
}

#[test]
fn unit_and_page_sizes_are_found_exactly() {
    for g in geometries() {
        let mut sim = Sim(Card::new(g.clone()));
        let mut buf = vec![0u8; 8192];
        let f = boundary::find(&mut sim, &boundary::Plan::default(), &mut buf, &ok).unwrap();
        assert_eq!(f.unit, Some(g.unit), "{g:?}: {:#?}", f.candidates);
        assert_eq!(f.page, Some(g.page), "{g:?}");
    }
}

fn sustained(g: &Geometry) -> steady::Outcome {
    let mut sim = Sim(Card::new(g.clone()));
    let load = steady::Load {
        streams: 1,
        spacing: g.size,
        chunk: CHUNK,
        skip: 0,
        min_bytes: 256 * MIB,
        max_time: 600.0,
    };
    let buf = vec![0u8; CHUNK as usize];
    steady::run(&mut sim, &load, &steady::Rule::default(), &buf, &ok).unwrap()
}

#[test]
fn cache_steady_rate_and_stalls_match_the_model() {
    for g in geometries() {
        let o = sustained(&g);
        let rate = o.steady.unwrap_or_else(|| panic!("{g:?}: no steady state"));
        let want = g.steady_rate(CHUNK);
        assert!(
            (rate / want - 1.0).abs() < 0.05,
            "{g:?}: steady {rate} want {want}"
        );
        let cache = o.cache_bytes();
        if g.cache == 0 {
            assert_eq!(cache, 0.0, "{g:?}");
        } else {
            let r = cache / g.cache as f64;
            assert!((r - 1.0).abs() < 0.10, "{g:?}: cache {cache} ratio {r}");
            assert!(
                (o.burst_rate / g.bus_rate - 1.0).abs() < 0.05,
                "{g:?}: {}",
                o.burst_rate
            );
        }
        let p99 = o.latency(0.99);
        let want = g.p99_latency(CHUNK);
        assert!(
            (p99 / want - 1.0).abs() < 0.20,
            "{g:?}: p99 {p99} want {want}"
        );
    }
}

#[test]
fn open_unit_limit_is_found_exactly() {
    for g in geometries() {
        let mut sim = Sim(Card::new(g.clone()));
        let plan = streams::Plan {
            max_streams: 8,
            spacing: 16 * MIB,
            chunk: CHUNK,
            min_bytes: 256 * MIB,
            max_time: 600.0,
        };
        let buf = vec![0u8; CHUNK as usize];
        let o = streams::measure(&mut sim, &plan, &steady::Rule::default(), &buf, &ok).unwrap();
        assert_eq!(o.limit(), Some(g.open_units), "{g:?}: {:#?}", o.points);
    }
}

/// The table docs/flash.md shows (bench/flash_truth.sh regenerates it):
/// each geometry's model figures against what the methods found.
#[test]
#[ignore = "prints the docs table; run by bench/flash_truth.sh"]
fn truth_table() {
    println!("| geometry (unit / open / cache) | unit found | page found | open units found | cache found (model) | steady rate found (model) | stall p99 found (model) |");
    println!("|---|---|---|---|---|---|---|");
    for g in geometries() {
        let mut sim = Sim(Card::new(g.clone()));
        let mut buf = vec![0u8; 8192];
        let f = boundary::find(&mut sim, &boundary::Plan::default(), &mut buf, &ok).unwrap();
        let o = sustained(&g);
        let mut sim = Sim(Card::new(g.clone()));
        let plan = streams::Plan {
            max_streams: 8,
            spacing: 16 * MIB,
            chunk: CHUNK,
            min_bytes: 256 * MIB,
            max_time: 600.0,
        };
        let buf = vec![0u8; CHUNK as usize];
        let u = streams::measure(&mut sim, &plan, &steady::Rule::default(), &buf, &ok).unwrap();
        let mib = |b: f64| format!("{:.1} MiB", b / MIB as f64);
        let mbs = |r: f64| format!("{:.2} MB/s", r / 1e6);
        println!(
            "| {} MiB / {} / {} MiB | {} | {} | {} ({}) | {} ({}) | {} ({}) | {:.1} ms ({:.1} ms) |",
            g.unit / MIB,
            g.open_units,
            g.cache / MIB,
            f.unit.map_or("-".into(), |u| mib(u as f64)),
            f.page.map_or("-".into(), |p| format!("{} KiB", p >> 10)),
            u.limit().map_or("-".into(), |l| l.to_string()),
            g.open_units,
            mib(o.cache_bytes()),
            mib(g.cache as f64),
            mbs(o.steady.unwrap_or(0.0)),
            mbs(g.steady_rate(CHUNK)),
            o.latency(0.99) * 1e3,
            g.p99_latency(CHUNK) * 1e3
        );
    }
}

/// A card the kernel sees as a block device: lab/flashsim serves the model
/// over NBD (with `--real`, a fake that keeps only that many bytes and wraps
/// addresses past them), qemu-storage-daemon exports it as a file over
/// FUSE, a loop device makes that a block device, ext2 goes on it. Torn
/// down in reverse order on drop.
struct KernelCard {
    dir: tempfile::TempDir,
    procs: Vec<std::process::Child>,
    loop_dev: Option<String>,
    mounted: bool,
}

impl KernelCard {
    fn mnt(&self) -> std::path::PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for KernelCard {
    fn drop(&mut self) {
        let sh = |args: &[&str]| {
            let _ = std::process::Command::new(args[0])
                .args(&args[1..])
                .output();
        };
        if self.mounted {
            sh(&["umount", self.mnt().to_str().unwrap()]);
        }
        if let Some(l) = &self.loop_dev {
            sh(&["losetup", "-d", l]);
        }
        let img = self.dir.path().join("card.img");
        sh(&["umount", img.to_str().unwrap()]);
        for p in self.procs.iter_mut().rev() {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Why the kernel card cannot be built here, if it cannot.
fn kernel_card_missing() -> Option<String> {
    if !common::is_root() {
        return Some("needs root (loop devices, mounts)".into());
    }
    for p in ["/dev/fuse", "/dev/loop-control"] {
        if !std::path::Path::new(p).exists() {
            return Some(format!("no {p}"));
        }
    }
    for t in ["qemu-storage-daemon", "losetup", "mkfs.ext2", "cargo"] {
        if !have(t) {
            return Some(format!("{t} is not installed"));
        }
    }
    None
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..100 {
        if ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{what} did not come up");
}

fn kernel_card(stated: &str, real: Option<&str>) -> KernelCard {
    let root = env!("CARGO_MANIFEST_DIR");
    let build = std::process::Command::new("cargo")
        .args(["build", "-q", "--manifest-path"])
        .arg(format!("{root}/lab/flashsim/Cargo.toml"))
        .status()
        .unwrap();
    assert!(build.success(), "building lab/flashsim failed");
    let dir = tempfile::tempdir().unwrap();
    let mut card = KernelCard {
        dir,
        procs: Vec::new(),
        loop_dev: None,
        mounted: false,
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut sim = std::process::Command::new(format!("{root}/lab/flashsim/target/debug/flashsim"));
    sim.args([
        "--port",
        &port.to_string(),
        "--size",
        stated,
        "--cache",
        "0",
        "--file",
    ])
    .arg(card.dir.path().join("back.img"))
    .stderr(std::process::Stdio::null());
    if let Some(r) = real {
        sim.args(["--real", r]);
    }
    card.procs.push(sim.spawn().unwrap());
    wait_for("flashsim", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let img = card.dir.path().join("card.img");
    std::fs::write(&img, b"").unwrap();
    let qsd = std::process::Command::new("qemu-storage-daemon")
        .arg("--blockdev")
        .arg(format!(
            "driver=nbd,server.type=inet,server.host=127.0.0.1,server.port={port},node-name=card"
        ))
        .arg("--export")
        .arg(format!(
            "type=fuse,id=card,node-name=card,mountpoint={},writable=on",
            img.display()
        ))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    card.procs.push(qsd);
    wait_for("the FUSE export", || {
        std::fs::metadata(&img).is_ok_and(|m| m.len() > 0)
    });
    let out = std::process::Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&img)
        .output()
        .unwrap();
    assert!(out.status.success(), "losetup: {}", common::stderr(&out));
    let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    card.loop_dev = Some(dev.clone());
    // ext2: no journal for the wrap to land on before the check starts.
    let mkfs = std::process::Command::new("mkfs.ext2")
        .args(["-q", "-F", "-b", "4096", "-E", "nodiscard", &dev])
        .output()
        .unwrap();
    assert!(
        mkfs.status.success(),
        "mkfs.ext2: {}",
        common::stderr(&mkfs)
    );
    std::fs::create_dir(card.mnt()).unwrap();
    let mount = std::process::Command::new("mount")
        .args(["-o", "noatime", &dev, card.mnt().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(mount.status.success(), "mount: {}", common::stderr(&mount));
    card.mounted = true;
    card
}

/// `flash.capacity -p size=SIZE` on `card`: (real_capacity, notes).
fn capacity_on(card: &KernelCard, size: &str) -> (f64, Vec<String>) {
    let env = common::Env::new();
    let out = env.run(&[
        "run",
        "flash.capacity",
        "-p",
        &format!("size={size}"),
        "-p",
        "file_size=16M",
        "--quiet-check",
        "0",
        "--no-store",
        "--json",
        "--target",
        card.mnt().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    capacity_result(&common::json(&out))
}

/// real_capacity and the notes of a flash.capacity run.
fn capacity_result(run: &serde_json::Value) -> (f64, Vec<String>) {
    let r = &run["results"][0];
    let real = r["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "real_capacity")
        .unwrap()["summary"]["median"]
        .as_f64()
        .unwrap();
    let notes = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    (real, notes)
}

/// A fake card (states 128 MiB, keeps 64 MiB) behind the kernel's block
/// layer: flash.capacity reports about its real size, not what it states.
#[test]
fn a_fake_card_is_found_with_its_real_capacity() {
    if let Some(why) = kernel_card_missing() {
        return common::skip(&why);
    }
    let card = kernel_card("128M", Some("64M"));
    let (real, notes) = capacity_on(&card, "88M");
    println!("fake 128 MiB card keeping 64 MiB: real_capacity {real} B; {notes:?}");
    assert!(notes.iter().any(|n| n.starts_with("FAKE")), "{notes:?}");
    // The file system's own metadata shares the 64 MiB that survive, and
    // the files start past it: the intact bytes are at most the real size
    // and most of it.
    assert!(real <= (64u64 << 20) as f64, "{real}");
    assert!(real >= (40u64 << 20) as f64, "{real}");
}

/// The same card without the fake: every byte reads back, "OK".
#[test]
fn an_honest_card_reports_ok() {
    if let Some(why) = kernel_card_missing() {
        return common::skip(&why);
    }
    let card = kernel_card("128M", None);
    let (real, notes) = capacity_on(&card, "88M");
    assert!(notes.iter().any(|n| n.starts_with("OK")), "{notes:?}");
    assert_eq!(real, (88u64 << 20) as f64);
}

/// On this machine's own file system (honest): OK, every byte back; and
/// without `size` the check refuses to fill anything.
#[test]
fn the_capacity_check_is_opt_in_and_an_honest_file_system_is_ok() {
    let env = common::Env::new();
    let t = env.target();
    let refused = env.run(&["run", "flash.capacity", "--target", t.to_str().unwrap()]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "{}",
        common::stderr(&refused)
    );
    assert!(
        common::stderr(&refused).contains("size="),
        "{}",
        common::stderr(&refused)
    );
    let out = env.run(&[
        "run",
        "flash.capacity",
        "-p",
        "size=8M",
        "-p",
        "file_size=2M",
        "--quiet-check",
        "0",
        "--no-store",
        "--json",
        "--target",
        t.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    let (real, notes) = capacity_result(&common::json(&out));
    assert_eq!(real, (8u64 << 20) as f64, "{notes:?}");
    assert!(notes.iter().any(|n| n.starts_with("OK")), "{notes:?}");
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}
