//! One rank's spread of times at one size (`--per-rank`): its mean and
//! percentiles over the timed iterations. A rank's mean hides whether all
//! its calls are a little slow or a few are very slow (a rank that gave
//! its core away and waited to be scheduled again); where ranks outnumber
//! cores the two call for different fixes, and this tells them apart.

use std::fmt::Write as _;

/// The quantiles a rank's spread reports.
const QUANTILES: [f64; 4] = [0.1, 0.5, 0.9, 0.99];

/// Values per rank on the wire: the mean, the quantiles and the maximum.
pub const WIRE_LEN: usize = 2 + QUANTILES.len();

/// One rank's times at one size, in µs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spread {
    /// Mean over the timed iterations.
    pub mean: f64,
    /// 10th percentile (nearest rank).
    pub p10: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Slowest iteration.
    pub max: f64,
}

impl Spread {
    /// The spread of `samples` (sorted here); all zero when there are none.
    pub fn of(samples: &mut [f64]) -> Spread {
        if samples.is_empty() {
            return Spread::default();
        }
        samples.sort_by(f64::total_cmp);
        // The rounding of the sum can carry the mean just past the
        // extremes (three samples of 0.18 average to 0.18000000000000002);
        // the mean of real numbers lies between them, and so does this one.
        let (min, max) = (samples[0], samples[samples.len() - 1]);
        let mean = (samples.iter().sum::<f64>() / samples.len() as f64).clamp(min, max);
        // The nearest-rank quantile: the smallest sample with at least a
        // fraction q of the samples at or below it.
        let at = |q: f64| {
            let rank = (q * samples.len() as f64).ceil() as usize;
            samples[rank.clamp(1, samples.len()) - 1]
        };
        let [p10, p50, p90, p99] = QUANTILES.map(at);
        Spread { mean, p10, p50, p90, p99, max }
    }

    /// As the allgather of the timings carries it.
    pub fn to_wire(&self) -> [f64; WIRE_LEN] {
        [self.mean, self.p10, self.p50, self.p90, self.p99, self.max]
    }

    /// Back from [`Spread::to_wire`]'s values.
    pub fn from_wire(v: &[f64; WIRE_LEN]) -> Spread {
        let [mean, p10, p50, p90, p99, max] = *v;
        Spread { mean, p10, p50, p90, p99, max }
    }

    /// The table's line for `rank`, under its size's row.
    pub fn table_line(&self, rank: usize) -> String {
        format!(
            "{:>24}{:>12.2}  p10 {:.2}  p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            format!("rank {rank}"),
            self.mean,
            self.p10,
            self.p50,
            self.p90,
            self.p99,
            self.max
        )
    }

    /// The JSON object for `rank`.
    pub fn json(&self, rank: usize, num: impl Fn(f64) -> String) -> String {
        let mut s = format!("{{\"rank\": {rank}");
        for (k, v) in [
            ("mean_us", self.mean),
            ("p10_us", self.p10),
            ("p50_us", self.p50),
            ("p90_us", self.p90),
            ("p99_us", self.p99),
            ("max_us", self.max),
        ] {
            let _ = write!(s, ", \"{k}\": {}", num(v));
        }
        s.push('}');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank_and_survive_the_wire() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let s = Spread::of(&mut v);
        assert_eq!((s.p10, s.p50, s.p90, s.p99, s.max), (10.0, 50.0, 90.0, 99.0, 100.0));
        assert_eq!(s.mean, 50.5);
        assert_eq!(Spread::from_wire(&s.to_wire()), s);
        let one = Spread::of(&mut [3.0]);
        assert_eq!((one.p10, one.p99, one.max, one.mean), (3.0, 3.0, 3.0, 3.0));
        assert_eq!(Spread::of(&mut []), Spread::default());
    }

    #[test]
    fn the_mean_of_equal_samples_is_the_sample() {
        // Summed in floating point, three 0.18 s average to just above 0.18.
        for n in [3, 15, 16] {
            let s = Spread::of(&mut vec![0.18; n]);
            assert_eq!((s.mean, s.max), (0.18, 0.18), "{n} samples");
        }
    }

    #[test]
    fn lines_name_the_rank() {
        let s = Spread::of(&mut [1.0, 2.0, 9.0]);
        assert!(s.table_line(3).contains("rank 3") && s.table_line(3).contains("max 9.00"), "{}", s.table_line(3));
        let j = s.json(3, |v| format!("{v}"));
        assert!(j.starts_with("{\"rank\": 3, \"mean_us\": 4") && j.ends_with("\"max_us\": 9}"), "{j}");
    }
}
