//! A flash card of known geometry, std only, so the host tests (virtual
//! clock, in-process) and the NBD server of the board lab (real sleeps,
//! lab/flashsim) share one model. It models time only: the NBD server keeps
//! the data in a sparse file.
//!
//! The model: writes go into a write cache of `cache` bytes at `bus_rate`;
//! the cache drains first in, first out at `program_rate`, one entry per
//! write and unit. Programming into a unit that is not open opens it, and
//! when `open_units` are already open the least recently written one is
//! closed first at `close_cost` seconds. Every `gc_every` bytes programmed
//! the card stalls for `gc_stall` seconds (garbage collection). Without a
//! cache a write waits for its own transfer and programming. A read costs
//! `read_base` + len / `read_rate`, plus `page_step` for every page
//! boundary it crosses and `unit_step` for every unit boundary.
#![allow(dead_code)]

use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct Geometry {
    pub size: u64,
    pub unit: u64,
    pub page: u64,
    pub open_units: usize,
    pub close_cost: f64,
    pub cache: u64,
    pub bus_rate: f64,
    pub program_rate: f64,
    pub gc_every: u64,
    pub gc_stall: f64,
    pub read_base: f64,
    pub read_rate: f64,
    pub page_step: f64,
    pub unit_step: f64,
}

impl Geometry {
    /// A card: unit size, open units, cache bytes; the rest typical of a
    /// class-10 SD card (10 MB/s programming, 40 MB/s bus).
    pub fn card(unit: u64, open_units: usize, cache: u64) -> Geometry {
        Geometry {
            size: 1 << 30,
            unit,
            page: 16 << 10,
            open_units,
            close_cost: 0.05,
            cache,
            bus_rate: 40e6,
            program_rate: 10e6,
            gc_every: 2 << 20,
            gc_stall: 0.08,
            read_base: 200e-6,
            read_rate: 20e6,
            page_step: 30e-6,
            unit_step: 150e-6,
        }
    }

    /// Seconds one sequential stream's `chunk` costs in the steady state.
    fn chunk_time(&self, chunk: u64) -> f64 {
        let c = chunk as f64;
        let program = c / self.program_rate
            + c * self.gc_stall / self.gc_every as f64
            + c * self.close_cost / self.unit as f64;
        if self.cache == 0 {
            program + c / self.bus_rate
        } else {
            program
        }
    }

    /// The model's steady write rate of one sequential stream (B/s).
    pub fn steady_rate(&self, chunk: u64) -> f64 {
        chunk as f64 / self.chunk_time(chunk)
    }

    /// The model's p99 write latency in the steady state: a share
    /// chunk/gc_every of the writes waits for a stall.
    pub fn p99_latency(&self, chunk: u64) -> f64 {
        let c = chunk as f64;
        let base = c / self.program_rate
            + if self.cache == 0 {
                c / self.bus_rate
            } else {
                0.0
            };
        if c / self.gc_every as f64 > 0.01 {
            base + self.gc_stall
        } else {
            base
        }
    }
}

pub struct Card {
    pub g: Geometry,
    /// The card's clock (s).
    pub now: f64,
    /// Time up to which the drain has run; the front entry started here.
    drain_t: f64,
    queue: VecDeque<(u64, u64)>,
    queued: u64,
    /// Open units, least recently written first.
    open: Vec<u64>,
    since_gc: u64,
}

impl Card {
    pub fn new(g: Geometry) -> Card {
        Card {
            g,
            now: 0.0,
            drain_t: 0.0,
            queue: VecDeque::new(),
            queued: 0,
            open: Vec::new(),
            since_gc: 0,
        }
    }

    /// What programming one entry costs in the present state.
    fn cost(&self, unit: u64, bytes: u64) -> f64 {
        let mut cost = bytes as f64 / self.g.program_rate;
        if !self.open.contains(&unit) && self.open.len() >= self.g.open_units {
            cost += self.g.close_cost;
        }
        let stalls = (self.since_gc + bytes) / self.g.gc_every - self.since_gc / self.g.gc_every;
        cost + stalls as f64 * self.g.gc_stall
    }

    /// Program one entry: its cost, with the open units and GC moved on.
    fn program(&mut self, unit: u64, bytes: u64) -> f64 {
        let cost = self.cost(unit, bytes);
        if let Some(i) = self.open.iter().position(|&u| u == unit) {
            self.open.remove(i);
        } else if self.open.len() >= self.g.open_units {
            self.open.remove(0);
        }
        self.open.push(unit);
        self.since_gc += bytes;
        cost
    }

    /// Run the drain up to `to` (whole entries only).
    fn drain_until(&mut self, to: f64) {
        while let Some(&(u, b)) = self.queue.front() {
            if self.drain_t + self.cost(u, b) > to {
                return;
            }
            self.complete_front();
        }
        self.drain_t = self.drain_t.max(to);
    }

    fn complete_front(&mut self) {
        if let Some((u, b)) = self.queue.pop_front() {
            let cost = self.program(u, b);
            self.drain_t += cost;
            self.queued -= b;
        }
    }

    /// The cost of a write of `len` bytes at `off`, applied to the clock.
    pub fn write(&mut self, off: u64, len: u64) {
        let mut pieces = Vec::new();
        let mut o = off;
        while o < off + len {
            let end = ((o / self.g.unit + 1) * self.g.unit).min(off + len);
            pieces.push((o / self.g.unit, end - o));
            o = end;
        }
        if self.g.cache == 0 {
            self.now += len as f64 / self.g.bus_rate;
            for (u, b) in pieces {
                self.now += self.program(u, b);
            }
            return;
        }
        self.now += len as f64 / self.g.bus_rate;
        self.drain_until(self.now);
        for (u, b) in pieces {
            while self.queued + b > self.g.cache && !self.queue.is_empty() {
                self.complete_front();
                self.now = self.now.max(self.drain_t);
            }
            if self.queue.is_empty() {
                self.drain_t = self.drain_t.max(self.now);
            }
            self.queue.push_back((u, b));
            self.queued += b;
        }
    }

    /// Wait until the cache is empty.
    pub fn flush(&mut self) {
        while !self.queue.is_empty() {
            self.complete_front();
        }
        self.now = self.now.max(self.drain_t);
    }

    /// The cost of a read, applied to the clock.
    pub fn read(&mut self, off: u64, len: u64) {
        let last = off + len - 1;
        let pages = last / self.g.page - off / self.g.page;
        let units = last / self.g.unit - off / self.g.unit;
        self.now += self.g.read_base
            + len as f64 / self.g.read_rate
            + (pages - units) as f64 * self.g.page_step
            + units as f64 * self.g.unit_step;
    }
}
