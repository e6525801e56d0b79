//! The steady-state rule of SNIA's Solid State Storage Performance Test
//! Specification (PTS), applied to per-round IOPS: over the last `WINDOW`
//! rounds, (1) every round is within ±10% of the window's mean, and (2) the
//! least-squares line through the window moves by at most 10% of the mean
//! from its first to its last round (±5% about its middle: SNIA's "slope
//! excursion"). Flash is fresh when it starts and typically falls off a
//! cliff once its write cache or free blocks run out; writing until the rule
//! holds shows the figure the device sustains.

/// Rounds in the measurement window (SNIA uses 5).
pub(crate) const WINDOW: usize = 5;
/// Largest allowed distance of a round from the window mean, as a fraction.
pub(crate) const DATA_EXCURSION: f64 = 0.10;
/// Largest allowed change of the fitted line across the window, as a
/// fraction of the mean (= ±5% about the middle).
pub(crate) const SLOPE_EXCURSION: f64 = 0.10;

/// How the last `WINDOW` rounds look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    pub(crate) mean: f64,
    /// Largest |round − mean| / mean.
    pub(crate) data: f64,
    /// |slope| × (WINDOW − 1) / mean: the fitted line's change across the window.
    pub(crate) slope: f64,
}

impl Window {
    pub(crate) fn steady(&self) -> bool {
        self.data <= DATA_EXCURSION && self.slope <= SLOPE_EXCURSION
    }
}

/// The window of the last `WINDOW` rounds, once there are that many.
pub(crate) fn window(rounds: &[f64]) -> Option<Window> {
    if rounds.len() < WINDOW {
        return None;
    }
    let w = &rounds[rounds.len() - WINDOW..];
    // One fit shared with flash.steady-state's rule (fio's range and slope).
    let f = crate::experiments::common::flash::steady::fit(w);
    let mean = f.mean;
    if mean <= 0.0 || !mean.is_finite() {
        return Some(Window {
            mean,
            data: f64::INFINITY,
            slope: f64::INFINITY,
        });
    }
    let data = (f.hi - mean).max(mean - f.lo) / mean;
    let slope = f.change / mean;
    Some(Window { mean, data, slope })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_rounds_are_steady() {
        let w = window(&[900.0, 100.0, 1000.0, 1010.0, 990.0, 1005.0, 995.0]).unwrap();
        assert!(w.steady(), "{w:?}");
        assert!((w.mean - 1000.0).abs() < 1e-9);
        assert!(w.data <= 0.011);
    }

    #[test]
    fn too_few_rounds_is_not_a_verdict() {
        assert_eq!(window(&[1.0, 1.0, 1.0, 1.0]), None);
    }

    #[test]
    fn one_round_out_of_band_is_not_steady() {
        // 1120 is 10.4% above the mean of 1014.
        let w = window(&[990.0, 1000.0, 1120.0, 980.0, 980.0]).unwrap();
        assert!(w.data > DATA_EXCURSION, "{w:?}");
        assert!(!w.steady());
    }

    #[test]
    fn a_steady_decline_inside_the_band_is_not_steady() {
        // Each round within ±8% of the mean, but the line falls 16% over the window.
        let w = window(&[1080.0, 1040.0, 1000.0, 960.0, 920.0]).unwrap();
        assert!(w.data <= DATA_EXCURSION, "{w:?}");
        assert!((w.slope - 0.16).abs() < 1e-9, "{w:?}");
        assert!(!w.steady());
        // A gentle 8% decline passes both rules.
        let w = window(&[1040.0, 1020.0, 1000.0, 980.0, 960.0]).unwrap();
        assert!(w.steady(), "{w:?}");
    }

    #[test]
    fn zero_iops_is_never_steady() {
        assert!(!window(&[0.0; 5]).unwrap().steady());
    }
}
