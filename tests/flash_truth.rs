//! Ground truth: the flash methods on a simulated card of known geometry
//! (tests/common/flashsim.rs) with a virtual clock, at three geometries.
//! Deterministic: nothing here depends on the speed of the machine.

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
