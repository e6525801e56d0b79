//! Change points in a series of stored medians: E-divisive means
//! (Matteson & James, "A Nonparametric Approach for Multiple Change Point
//! Analysis of Multivariate Data", JASA 2014), the method Hunter and
//! MongoDB's performance CI use.
//!
//! The series is split recursively where the energy statistic between the
//! two sides is largest; each split is kept only when a permutation test
//! says a split that large is unlikely in a series without change
//! (p < alpha). The permutations use a fixed seed, so the same history always
//! gives the same change points. Distances use the exponent 1 (the usual
//! choice: finite first moments are enough).

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

/// How the search is run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    /// Significance level of each split (default 0.01: a history gates CI
    /// pipelines, where a false alarm costs more than a late one, and every
    /// accepted split opens more segments to search).
    pub(crate) alpha: f64,
    /// Permutations per test (default 499: p-values down to 0.002).
    pub(crate) permutations: usize,
    /// Fewest points on each side of a change (default 3: a single odd run
    /// is an outlier, not a change).
    pub(crate) min_size: usize,
    pub(crate) seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            alpha: 0.01,
            permutations: 499,
            min_size: 3,
            seed: 0x7e57,
        }
    }
}

/// One change: the series changes between `index - 1` and `index`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct ChangePoint {
    pub(crate) index: usize,
    /// Permutation p-value of the split when it was found.
    pub(crate) p_value: f64,
    /// The energy statistic of the split (larger = clearer).
    pub(crate) energy: f64,
}

/// All change points of `xs`, in index order.
pub(crate) fn e_divisive(xs: &[f64], opt: &Options) -> Vec<ChangePoint> {
    search(xs, opt, best_split, |seg, q, rng| {
        permutation_p(seg, q, opt, rng)
    })
}

/// The recursive search with a given statistic (`split`: the best split of
/// a segment and its q) and permutation test (`p_value` of a segment's q).
fn search(
    xs: &[f64],
    opt: &Options,
    split: impl Fn(&[f64], usize) -> Option<(usize, f64)>,
    mut p_value: impl FnMut(&[f64], f64, &mut SmallRng) -> f64,
) -> Vec<ChangePoint> {
    let mut rng = SmallRng::seed_from_u64(opt.seed);
    let mut found: Vec<ChangePoint> = Vec::new();
    // Segments as [start, end) bounds between accepted change points.
    loop {
        let mut bounds: Vec<usize> = found.iter().map(|c| c.index).collect();
        bounds.push(0);
        bounds.push(xs.len());
        bounds.sort_unstable();
        bounds.dedup();
        // The best split over all current segments.
        let best = bounds
            .windows(2)
            .filter_map(|w| split(&xs[w[0]..w[1]], opt.min_size).map(|(t, q)| (w[0], w[1], t, q)))
            .max_by(|a, b| a.3.total_cmp(&b.3));
        let Some((start, end, tau, q)) = best else {
            break;
        };
        let p = p_value(&xs[start..end], q, &mut rng);
        if p >= opt.alpha {
            break;
        }
        found.push(ChangePoint {
            index: start + tau,
            p_value: p,
            energy: q,
        });
    }
    found.sort_by_key(|c| c.index);
    found
}

/// The split of `xs` with the largest scaled energy statistic
/// Q(τ) = τ(n−τ)/n · [2/(τ(n−τ)) Σ|x−y| − 1/C(τ,2) Σ|x−x'| − 1/C(n−τ,2) Σ|y−y'|],
/// with at least `min` points on each side; `None` when no split is allowed.
fn best_split(xs: &[f64], min: usize) -> Option<(usize, f64)> {
    let seg = Segment::new(xs);
    seg.best_split(&seg.ranks, min, &mut Fenwick::new(xs.len()))
}

/// One segment prepared once for its own best split and all its
/// permutations: every distance sum E-divisive needs is rebuilt from the
/// sorted values, so one ordering costs O(n log n) instead of O(n²).
struct Segment {
    /// The values in ascending order, minus their median: distances do not
    /// change, the sums stay small (less cancellation), and a constant series
    /// is all zeros, so its statistic is exactly 0 as with the direct sums.
    sorted: Vec<f64>,
    /// The rank of each value in series order (ties broken by position).
    ranks: Vec<u32>,
    /// Σ_j |x_j − x| over the whole segment for the value of each rank: the
    /// same in every ordering.
    rowsum: Vec<f64>,
    /// Σ_{i<j} |x_i − x_j|.
    total: f64,
}

impl Segment {
    fn new(xs: &[f64]) -> Segment {
        let n = xs.len();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by(|&a, &b| xs[a as usize].total_cmp(&xs[b as usize]).then(a.cmp(&b)));
        let mut ranks = vec![0u32; n];
        for (r, &i) in order.iter().enumerate() {
            ranks[i as usize] = r as u32;
        }
        let mid = if n == 0 {
            0.0
        } else {
            xs[order[n / 2] as usize]
        };
        let sorted: Vec<f64> = order.iter().map(|&i| xs[i as usize] - mid).collect();
        let all: f64 = sorted.iter().sum();
        let mut below = 0.0;
        let rowsum: Vec<f64> = sorted
            .iter()
            .enumerate()
            .map(|(r, &v)| {
                let above = all - below - v;
                let s = (r as f64 * v - below) + (above - (n - 1 - r) as f64 * v);
                below += v;
                s
            })
            .collect();
        let total = rowsum.iter().sum::<f64>() / 2.0;
        Segment {
            sorted,
            ranks,
            rowsum,
            total,
        }
    }

    /// The best split of the segment in the order `ranks` gives (the
    /// segment's own order, or a permutation of it).
    fn best_split(&self, ranks: &[u32], min: usize, tree: &mut Fenwick) -> Option<(usize, f64)> {
        tree.clear();
        // Sum of the values already moved to the left.
        let mut prefix = 0.0;
        scan_splits(ranks.len(), min, self.total, |k| {
            // Point k's distances to the k points before it: those below
            // it (count c, sum s) and the rest.
            let r = ranks[k] as usize;
            let v = self.sorted[r];
            let (c, s) = tree.below(r);
            let left = v * (2.0 * c - k as f64) + prefix - 2.0 * s;
            tree.add(r, v);
            prefix += v;
            (left, self.rowsum[r] - left)
        })
    }
}

/// The split of `n` points with the largest scaled energy statistic, at
/// least `min` on each side. Starting with τ = 0 (everything on the right,
/// `total` the sum of distances within it), `moved(k)` moves point k to the
/// left and gives its distances to the points before it and after it.
fn scan_splits(
    n: usize,
    min: usize,
    total: f64,
    mut moved: impl FnMut(usize) -> (f64, f64),
) -> Option<(usize, f64)> {
    let min = min.max(2);
    if n < 2 * min {
        return None;
    }
    let (mut within_l, mut within_r, mut between) = (0.0, total, 0.0);
    let mut best: Option<(usize, f64)> = None;
    for tau in 1..n {
        let (left, right) = moved(tau - 1);
        within_l += left;
        within_r -= right;
        between += right - left;
        if tau < min || n - tau < min {
            continue;
        }
        let (a, b) = (tau as f64, (n - tau) as f64);
        let e = 2.0 * between / (a * b)
            - within_l / (a * (a - 1.0) / 2.0)
            - within_r / (b * (b - 1.0) / 2.0);
        let q = a * b / n as f64 * e;
        if best.is_none_or(|(_, bq)| q > bq) {
            best = Some((tau, q));
        }
    }
    best
}

/// Counts and sums of the values added so far, by rank (a Fenwick tree).
struct Fenwick {
    /// (count, sum) per node, side by side for one cache line per step.
    nodes: Vec<[f64; 2]>,
}

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick {
            nodes: vec![[0.0; 2]; n + 1],
        }
    }

    fn clear(&mut self) {
        self.nodes.fill([0.0; 2]);
    }

    fn add(&mut self, rank: usize, v: f64) {
        let mut i = rank + 1;
        while i < self.nodes.len() {
            self.nodes[i][0] += 1.0;
            self.nodes[i][1] += v;
            i += i & i.wrapping_neg();
        }
    }

    /// Count and sum of the added values with a rank below `rank`.
    fn below(&self, rank: usize) -> (f64, f64) {
        let (mut c, mut s) = (0.0, 0.0);
        let mut i = rank;
        while i > 0 {
            c += self.nodes[i][0];
            s += self.nodes[i][1];
            i &= i - 1;
        }
        (c, s)
    }
}

/// Share of random orderings of the segment whose best split is at least as
/// large as the one found (with the usual +1 so p is never 0).
///
/// Sequential (Besag & Clifford 1991): the test stops as soon as enough
/// orderings reached `q` that p cannot fall below alpha any more; the p
/// returned is then the (already non-significant) value reached so far. A
/// split that is kept always ran every permutation, so its p-value and the
/// random stream used for the next test are those of the full test.
fn permutation_p(seg: &[f64], q: f64, opt: &Options, rng: &mut SmallRng) -> f64 {
    let prepared = Segment::new(seg);
    let mut perm = prepared.ranks.clone();
    let mut tree = Fenwick::new(seg.len());
    let p_of = |k: usize| (k + 1) as f64 / (opt.permutations + 1) as f64;
    let mut as_large = 0;
    for _ in 0..opt.permutations {
        perm.shuffle(rng);
        if prepared
            .best_split(&perm, opt.min_size, &mut tree)
            .is_some_and(|(_, pq)| pq >= q)
        {
            as_large += 1;
            if p_of(as_large) >= opt.alpha {
                break;
            }
        }
    }
    p_of(as_large)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    fn noise(n: usize, mean: f64, sd: f64, seed: u64) -> Vec<f64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        // Sum of uniforms: close enough to normal for a test, no extra crate.
        (0..n)
            .map(|_| mean + sd * ((0..12).map(|_| rng.gen::<f64>()).sum::<f64>() - 6.0))
            .collect()
    }

    /// Noisy levels one after the other (sd 2): `(points, mean)` each, the
    /// k-th drawn with seed `seed + k`.
    fn levels(parts: &[(usize, f64)], seed: u64) -> Vec<f64> {
        (0..)
            .zip(parts)
            .flat_map(|(k, &(n, mean))| noise(n, mean, 2.0, seed + k))
            .collect()
    }

    /// The one change point of `xs`, which must be in `near`.
    fn one_change(xs: &[f64], near: std::ops::RangeInclusive<usize>) -> ChangePoint {
        let cps = e_divisive(xs, &Options::default());
        assert_eq!(cps.len(), 1, "{cps:?}");
        assert!(near.contains(&cps[0].index), "{cps:?}");
        cps[0].clone()
    }

    #[test]
    fn finds_a_known_step() {
        let cp = one_change(&levels(&[(30, 100.0), (20, 115.0)], 1), 29..=31);
        assert!(cp.p_value < 0.01);
    }

    #[test]
    fn finds_two_steps() {
        let xs = levels(&[(25, 100.0), (25, 80.0), (25, 100.0)], 3);
        let idx: Vec<usize> = e_divisive(&xs, &Options::default())
            .iter()
            .map(|c| c.index)
            .collect();
        assert_eq!(idx.len(), 2, "{idx:?}");
        assert!(
            (24..=26).contains(&idx[0]) && (49..=51).contains(&idx[1]),
            "{idx:?}"
        );
    }

    #[test]
    fn pure_noise_raises_no_alarm() {
        // Twenty independent noisy histories: at alpha 0.01 an occasional
        // false split is possible in principle; more than one in twenty
        // would mean the test is broken.
        let alarms: usize = (0..20)
            .map(|s| e_divisive(&noise(60, 100.0, 3.0, 100 + s), &Options::default()).len())
            .sum();
        assert!(
            alarms <= 2,
            "{alarms} false change points in 20 noise series"
        );
    }

    #[test]
    fn a_single_outlier_is_not_a_change() {
        let mut xs = noise(40, 100.0, 1.0, 9);
        xs[20] = 300.0;
        assert!(e_divisive(&xs, &Options::default()).is_empty());
    }

    #[test]
    fn short_series_have_no_change_points() {
        assert!(e_divisive(&[], &Options::default()).is_empty());
        assert!(e_divisive(&[1.0, 50.0, 1.0, 50.0, 1.0], &Options::default()).is_empty());
    }

    /// The O(n²) row sums the search used before the sorted prefix sums:
    /// the reference the fast statistic must reproduce.
    fn best_split_direct(xs: &[f64], min: usize) -> Option<(usize, f64)> {
        let n = xs.len();
        let left: Vec<f64> = (0..n)
            .map(|i| xs[..i].iter().map(|x| (x - xs[i]).abs()).sum())
            .collect();
        let right: Vec<f64> = (0..n)
            .map(|i| xs[i + 1..].iter().map(|x| (x - xs[i]).abs()).sum())
            .collect();
        scan_splits(n, min, right.iter().sum(), |k| (left[k], right[k]))
    }

    /// The search as it was before the fast statistic: direct sums, every
    /// permutation run.
    fn e_divisive_direct(xs: &[f64], opt: &Options) -> Vec<ChangePoint> {
        search(xs, opt, best_split_direct, |seg, q, rng| {
            let mut perm = seg.to_vec();
            let mut as_large = 0;
            for _ in 0..opt.permutations {
                perm.shuffle(rng);
                if best_split_direct(&perm, opt.min_size).is_some_and(|(_, pq)| pq >= q) {
                    as_large += 1;
                }
            }
            (as_large + 1) as f64 / (opt.permutations + 1) as f64
        })
    }

    #[test]
    fn the_fast_search_finds_what_the_direct_one_found() {
        // Steps of several sizes, noise, a drift and ties: the same change
        // points with the same p-values (the kept splits ran every
        // permutation on the same random stream).
        for case in 0..24u64 {
            let n = 40 + 10 * case as usize;
            let mut xs = noise(n, 100.0, 2.0, 500 + case);
            match case % 4 {
                0 => xs[n / 2..]
                    .iter_mut()
                    .for_each(|x| *x += 1.0 + case as f64 * 0.3),
                1 => {}
                2 => xs
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x += i as f64 * 0.05),
                _ => xs.iter_mut().for_each(|x| *x = x.round()),
            }
            let opt = Options {
                permutations: 199,
                alpha: 0.05,
                ..Options::default()
            };
            let fast = e_divisive(&xs, &opt);
            let direct = e_divisive_direct(&xs, &opt);
            assert_eq!(
                fast.len(),
                direct.len(),
                "case {case}: {fast:?} vs {direct:?}"
            );
            for (f, d) in fast.iter().zip(&direct) {
                assert_eq!((f.index, f.p_value), (d.index, d.p_value), "case {case}");
                assert!((f.energy - d.energy).abs() <= 1e-9 * d.energy.abs().max(1.0));
            }
        }
    }

    #[test]
    fn fast_statistic_matches_the_direct_sums() {
        let mut rng = SmallRng::seed_from_u64(42);
        for case in 0..60 {
            let n = 6 + case * 3;
            // Continuous values, then heavy ties (few distinct values), then
            // a large offset with a small spread.
            let xs: Vec<f64> = (0..n)
                .map(|i| match case % 3 {
                    0 => rng.gen::<f64>() * 10.0 + if i > n / 2 { 3.0 } else { 0.0 },
                    1 => (rng.gen::<u32>() % 3) as f64 * 0.1,
                    _ => 1e8 + rng.gen::<f64>() * 1e3,
                })
                .collect();
            let (ft, fq) = best_split(&xs, 3).unwrap();
            let (dt, dq) = best_split_direct(&xs, 3).unwrap();
            assert!(
                (fq - dq).abs() <= 1e-9 * dq.abs().max(1.0),
                "case {case}: {fq} vs {dq}"
            );
            // The same split, except where few distinct values let two
            // splits tie exactly and rounding picks either.
            if case % 3 != 1 {
                assert_eq!(ft, dt, "case {case}");
            }
        }
    }

    #[test]
    fn a_constant_series_has_a_zero_statistic_and_no_change() {
        for v in [0.0, 0.1, 4096.0, 1e9 + 0.3] {
            let xs = vec![v; 40];
            assert_eq!(best_split(&xs, 3).unwrap().1, 0.0, "{v}");
            assert!(e_divisive(&xs, &Options::default()).is_empty(), "{v}");
        }
    }

    #[test]
    fn a_long_history_finds_its_step_and_noise_stops_early() {
        // 3,000 runs: the O(n²) search took seconds here; the step at 2,000
        // is found exactly once and nothing else.
        one_change(&levels(&[(2000, 100.0), (1000, 97.0)], 11), 1990..=2010);
        assert!(e_divisive(&noise(3000, 100.0, 2.0, 13), &Options::default()).is_empty());
    }

    #[test]
    fn best_split_matches_the_definition() {
        // Brute force Q(τ) for a small series and check the incremental sums.
        let xs: [f64; 7] = [1.0, 2.0, 1.5, 9.0, 8.0, 9.5, 8.5];
        let n = xs.len();
        let brute = |tau: usize| {
            let (l, r) = xs.split_at(tau);
            let between: f64 = l
                .iter()
                .flat_map(|x| r.iter().map(move |y| (x - y).abs()))
                .sum();
            let within = |s: &[f64]| {
                let mut t = 0.0;
                for i in 0..s.len() {
                    for j in i + 1..s.len() {
                        t += (s[i] - s[j]).abs();
                    }
                }
                t
            };
            let (a, b) = (tau as f64, (n - tau) as f64);
            let e = 2.0 * between / (a * b)
                - within(l) / (a * (a - 1.0) / 2.0)
                - within(r) / (b * (b - 1.0) / 2.0);
            a * b / n as f64 * e
        };
        let (tau, q) = best_split(&xs, 2).unwrap();
        assert_eq!(tau, 3);
        assert!((q - brute(3)).abs() < 1e-9, "{q} vs {}", brute(3));
        for t in 2..=5 {
            assert!(brute(t) <= q + 1e-9);
        }
    }
}
