//! The exact (Clopper–Pearson) confidence interval of a proportion: k
//! events out of n independent chances, e.g. missed frame deadlines.
//!
//! A single trial of a paced stream has no spread to build an interval
//! from, but it counts: 4 frames missed of 300 is a proportion whose
//! uncertainty the binomial distribution gives. Clopper–Pearson inverts the
//! two binomial tails, so the interval holds at least its level for every
//! true proportion (never too narrow by construction, unlike Wald's).
//! Misses that come in bursts are not independent: the interval is then
//! narrower than the truth. Where several trials count the same thing,
//! [`dispersion`] measures how much more their proportions vary than
//! chance would make them, and the counts are shrunk by it before the
//! interval is taken (the quasi-binomial effective sample size). Within
//! one trial, the same measure over its blocks (io.stream's seconds) shows
//! a burst; where nothing counts blocks, the verdict says "binomial".

/// P(X ≤ k) for X ~ Binomial(n, p), in log space (no underflow).
fn cdf(n: u64, k: u64, p: f64) -> f64 {
    if p <= 0.0 || k >= n {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    let (lp, lq) = (p.ln(), (-p).ln_1p());
    let mut ln_c = 0.0;
    let mut sum = 0.0;
    for i in 0..=k {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        sum += (ln_c + i as f64 * lp + (n - i) as f64 * lq).exp();
    }
    sum.min(1.0)
}

/// The p in (0, 1) where the decreasing function `f` crosses `target`.
fn solve(f: impl Fn(f64) -> f64, target: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The two-sided Clopper–Pearson interval of k events in n at `level`
/// (0.95): (low, high). None when n is 0 or k exceeds n.
pub(crate) fn clopper_pearson(k: u64, n: u64, level: f64) -> Option<(f64, f64)> {
    if n == 0 || k > n {
        return None;
    }
    let tail = (1.0 - level) / 2.0;
    // low: P(X ≥ k | low) = tail, i.e. P(X ≤ k − 1 | low) = 1 − tail.
    let low = if k == 0 {
        0.0
    } else {
        solve(|p| cdf(n, k - 1, p), 1.0 - tail)
    };
    // high: P(X ≤ k | high) = tail.
    let high = if k == n {
        1.0
    } else {
        solve(|p| cdf(n, k, p), tail)
    };
    Some((low, high))
}

/// How much more the trials' proportions (k_i of n_i each) vary than
/// binomial chance: Pearson's χ² over k − 1 degrees of freedom, at least 1.
/// 1 with fewer than two trials, or with no event or no non-event at all
/// (nothing to spread).
pub(crate) fn dispersion(trials: &[(u64, u64)]) -> f64 {
    let (k, n) = trials
        .iter()
        .fold((0u64, 0u64), |(k, n), t| (k + t.0, n + t.1));
    let used: Vec<&(u64, u64)> = trials.iter().filter(|t| t.1 > 0).collect();
    if used.len() < 2 || k == 0 || k >= n {
        return 1.0;
    }
    let p = k as f64 / n as f64;
    let chi2: f64 = used
        .iter()
        .map(|&&(ki, ni)| {
            let e = ni as f64 * p;
            (ki as f64 - e).powi(2) / (e * (1.0 - p))
        })
        .sum();
    (chi2 / (used.len() - 1) as f64).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn matches_the_published_exact_intervals() {
        // Reference values: the beta quantiles, as R's binom.test gives them.
        let (lo, hi) = clopper_pearson(0, 300, 0.95).unwrap();
        assert_eq!(lo, 0.0);
        assert!(close(hi, 0.012_221, 2e-6), "{hi}");
        let (lo, hi) = clopper_pearson(4, 300, 0.95).unwrap();
        assert!(close(lo, 0.003_645, 2e-6), "{lo}");
        assert!(close(hi, 0.033_785, 2e-6), "{hi}");
        let (lo, hi) = clopper_pearson(5, 10, 0.95).unwrap();
        assert!(close(lo, 0.187_086, 2e-6), "{lo}");
        assert!(close(hi, 0.812_914, 2e-6), "{hi}");
        let (lo, hi) = clopper_pearson(10, 10, 0.95).unwrap();
        assert!(close(lo, 0.691_503, 2e-6), "{lo}");
        assert_eq!(hi, 1.0);
    }

    #[test]
    fn zero_misses_need_enough_frames_to_claim_under_one_percent() {
        // The rule of three, exactly: 0 of n is under 1% at 95% only from
        // n = 368 on.
        assert!(clopper_pearson(0, 367, 0.95).unwrap().1 > 0.01);
        assert!(clopper_pearson(0, 368, 0.95).unwrap().1 <= 0.01);
    }

    #[test]
    fn nothing_to_count_gives_no_interval() {
        assert_eq!(clopper_pearson(0, 0, 0.95), None);
        assert_eq!(clopper_pearson(3, 2, 0.95), None);
    }

    #[test]
    fn trials_that_vary_more_than_chance_are_over_dispersed() {
        // 4 misses in each of ten 420-frame recordings: as even as chance
        // makes them (χ² 0), so no widening.
        assert_eq!(dispersion(&[(4, 420); 10]), 1.0);
        // The same 40 misses all in one recording: a burst.
        let mut burst = vec![(0, 420); 9];
        burst.push((40, 420));
        let phi = dispersion(&burst);
        assert!(phi > 30.0, "{phi}");
        // Nothing to spread: no event, one trial.
        assert_eq!(dispersion(&[(0, 420); 10]), 1.0);
        assert_eq!(dispersion(&[(40, 420)]), 1.0);
    }
}
