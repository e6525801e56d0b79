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
pub struct Options {
    /// Significance level of each split (default 0.01: a history gates CI
    /// pipelines, where a false alarm costs more than a late one, and every
    /// accepted split opens more segments to search).
    pub alpha: f64,
    /// Permutations per test (default 499: p-values down to 0.002).
    pub permutations: usize,
    /// Fewest points on each side of a change (default 3: a single odd run
    /// is an outlier, not a change).
    pub min_size: usize,
    pub seed: u64,
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
pub struct ChangePoint {
    pub index: usize,
    /// Permutation p-value of the split when it was found.
    pub p_value: f64,
    /// The energy statistic of the split (larger = clearer).
    pub energy: f64,
}

/// All change points of `xs`, in index order.
pub fn e_divisive(xs: &[f64], opt: &Options) -> Vec<ChangePoint> {
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
            .filter_map(|w| {
                best_split(&xs[w[0]..w[1]], opt.min_size).map(|(t, q)| (w[0], w[1], t, q))
            })
            .max_by(|a, b| a.3.total_cmp(&b.3));
        let Some((start, end, tau, q)) = best else {
            break;
        };
        let p = permutation_p(&xs[start..end], q, opt, &mut rng);
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
    let n = xs.len();
    let min = min.max(2);
    if n < 2 * min {
        return None;
    }
    // Row sums of the distance matrix to the left and the right of each point.
    let left: Vec<f64> = (0..n)
        .map(|i| xs[..i].iter().map(|x| (x - xs[i]).abs()).sum())
        .collect();
    let right: Vec<f64> = (0..n)
        .map(|i| xs[i + 1..].iter().map(|x| (x - xs[i]).abs()).sum())
        .collect();
    // Start with τ = 0: everything on the right.
    let mut within_l = 0.0;
    let mut within_r: f64 = right.iter().sum();
    let mut between = 0.0;
    let mut best: Option<(usize, f64)> = None;
    for tau in 1..n {
        // Move point τ−1 from the right side to the left side.
        let k = tau - 1;
        within_l += left[k];
        within_r -= right[k];
        between += right[k] - left[k];
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

/// Share of random orderings of the segment whose best split is at least as
/// large as the one found (with the usual +1 so p is never 0).
fn permutation_p(seg: &[f64], q: f64, opt: &Options, rng: &mut SmallRng) -> f64 {
    let mut perm = seg.to_vec();
    let mut as_large = 0;
    for _ in 0..opt.permutations {
        perm.shuffle(rng);
        if best_split(&perm, opt.min_size).is_some_and(|(_, pq)| pq >= q) {
            as_large += 1;
        }
    }
    (as_large + 1) as f64 / (opt.permutations + 1) as f64
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

    #[test]
    fn finds_a_known_step() {
        let mut xs = noise(30, 100.0, 2.0, 1);
        xs.extend(noise(20, 115.0, 2.0, 2));
        let cps = e_divisive(&xs, &Options::default());
        assert_eq!(cps.len(), 1, "{cps:?}");
        assert!((29..=31).contains(&cps[0].index), "{cps:?}");
        assert!(cps[0].p_value < 0.01);
    }

    #[test]
    fn finds_two_steps() {
        let mut xs = noise(25, 100.0, 2.0, 3);
        xs.extend(noise(25, 80.0, 2.0, 4));
        xs.extend(noise(25, 100.0, 2.0, 5));
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
