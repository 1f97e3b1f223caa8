//! The statistics every report rests on: percentiles of latencies, paired ratios of
//! alternating rounds, and the flag for a side too spread out (or split in two) for its
//! median to mean much.

use serde::{Deserialize, Serialize};

/// The `q`-quantile (0.0 to 1.0) of `sorted` by nearest rank: the smallest value with at
/// least a `q` share of the values at or below it. `None` when empty. `sorted` must be
/// sorted ascending.
pub fn quantile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.saturating_sub(1)).copied()
}

/// Latency percentiles, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// How many samples.
    pub samples: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

impl Latency {
    /// The percentiles of `samples` (sorted here).
    pub fn of(mut samples: Vec<u64>) -> Self {
        samples.sort_unstable();
        Self {
            samples: samples.len() as u64,
            p50: quantile(&samples, 0.5).unwrap_or(0),
            p99: quantile(&samples, 0.99).unwrap_or(0),
            max: samples.last().copied().unwrap_or(0),
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when
/// empty. NaNs sort last.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    })
}

/// How spread out one side's values are, relative to its median: (max − min) / median.
/// 0 for fewer than two values or a zero median.
pub fn relative_spread(values: &[f64]) -> f64 {
    let (Some(min), Some(max)) = (
        values.iter().copied().reduce(f64::min),
        values.iter().copied().reduce(f64::max),
    ) else {
        return 0.0;
    };
    match median(values) {
        Some(median) if values.len() >= 2 && median > 0.0 => (max - min) / median,
        _ => 0.0,
    }
}

/// Whether `values` fall in two clusters: the widest gap between neighbours (sorted) is
/// more than half of the whole range and each side of it holds at least two values.
pub fn split_in_two(values: &[f64]) -> bool {
    if values.len() < 4 {
        return false;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let range = sorted[sorted.len() - 1] - sorted[0];
    if range <= 0.0 {
        return false;
    }
    let (at, gap) = sorted
        .windows(2)
        .enumerate()
        .map(|(i, pair)| (i + 1, pair[1] - pair[0]))
        .fold(
            (0, 0.0),
            |best, next| if next.1 > best.1 { next } else { best },
        );
    gap > range / 2.0 && at >= 2 && sorted.len() - at >= 2
}

/// A comparison of side B against side A over paired rounds (A B A B …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// B / A per pair, in round order.
    pub ratios: Vec<f64>,
    /// Median of the ratios.
    pub median: f64,
    /// Smallest ratio.
    pub min: f64,
    /// Largest ratio.
    pub max: f64,
    /// Side A's relative spread ([`relative_spread`]).
    pub a_spread: f64,
    /// Side B's relative spread.
    pub b_spread: f64,
    /// Warnings that the median alone misleads: a side far more spread out than the
    /// other (`"a wide"`, `"b wide"`), or split in two clusters (`"a bimodal"`,
    /// `"b bimodal"`).
    pub flags: Vec<String>,
}

/// A side is "wide" when its relative spread is over this and over twice the other's.
pub const WIDE_SPREAD: f64 = 0.15;

impl Paired {
    /// Compares `b` to `a`, pairing values by index (a pair with a zero or missing `a` is
    /// left out of the ratios).
    pub fn of(a: &[f64], b: &[f64]) -> Self {
        let ratios: Vec<f64> = a
            .iter()
            .zip(b)
            .filter(|(a, _)| **a > 0.0)
            .map(|(a, b)| b / a)
            .collect();
        let (a_spread, b_spread) = (relative_spread(a), relative_spread(b));
        let mut flags = Vec::new();
        for (name, spread, other, values) in
            [("a", a_spread, b_spread, a), ("b", b_spread, a_spread, b)]
        {
            if spread > WIDE_SPREAD && spread > 2.0 * other {
                flags.push(format!("{name} wide"));
            }
            if split_in_two(values) {
                flags.push(format!("{name} bimodal"));
            }
        }
        Self {
            median: median(&ratios).unwrap_or(f64::NAN),
            min: ratios.iter().copied().reduce(f64::min).unwrap_or(f64::NAN),
            max: ratios.iter().copied().reduce(f64::max).unwrap_or(f64::NAN),
            ratios,
            a_spread,
            b_spread,
            flags,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<u64> = (1..=1000).collect();
        assert_eq!(quantile(&values, 0.5), Some(500));
        assert_eq!(quantile(&values, 0.99), Some(990));
        assert_eq!(quantile(&values, 1.0), Some(1000));
        assert_eq!(quantile(&[5], 0.99), Some(5));
        assert_eq!(quantile(&[], 0.5), None);
        let latency = Latency::of(vec![30, 10, 20, 40]);
        assert_eq!(
            (latency.p50, latency.p99, latency.max, latency.samples),
            (20, 40, 40, 4)
        );
        assert_eq!(Latency::of(Vec::new()), Latency::default());
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn paired_ratios_are_b_over_a_per_round() {
        let paired = Paired::of(
            &[100.0, 110.0, 90.0, 100.0, 105.0],
            &[90.0, 99.0, 90.0, 80.0, 105.0],
        );
        assert_eq!(paired.ratios, [0.9, 0.9, 1.0, 0.8, 1.0]);
        assert_eq!(paired.median, 0.9);
        assert_eq!((paired.min, paired.max), (0.8, 1.0));
        assert!(paired.flags.is_empty(), "{:?}", paired.flags);
    }

    #[test]
    fn a_side_far_more_spread_than_the_other_is_flagged_wide() {
        let steady = [100.0, 101.0, 99.0, 100.0, 100.0];
        let erratic = [100.0, 180.0, 95.0, 140.0, 110.0];
        let paired = Paired::of(&steady, &erratic);
        assert_eq!(paired.flags, ["b wide"]);
        assert!(paired.b_spread > 0.5 && paired.a_spread < 0.05);
        // Equally noisy sides are not flagged against each other.
        assert!(
            Paired::of(&erratic, &erratic)
                .flags
                .iter()
                .all(|f| !f.ends_with("wide"))
        );
    }

    #[test]
    fn two_clusters_are_flagged_bimodal_and_one_outlier_is_not() {
        // The lock-contention signature: some rounds at 1x, some at 2.5x.
        let split = [100.0, 250.0, 104.0, 245.0, 98.0, 252.0];
        assert!(split_in_two(&split));
        let paired = Paired::of(&[100.0; 6], &split);
        assert!(
            paired.flags.contains(&"b bimodal".to_owned()),
            "{:?}",
            paired.flags
        );
        assert!(
            !split_in_two(&[100.0, 101.0, 99.0, 100.0, 250.0]),
            "one outlier"
        );
        assert!(!split_in_two(&[100.0, 100.0, 100.0, 100.0]), "no range");
    }
}
