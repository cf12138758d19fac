//! Samples of one measured quantity and the statistics the report quotes.
//!
//! Percentiles use the nearest-rank method (`p99` of 20 samples is the 20th
//! smallest, i.e. the maximum): with the sample counts used here, interpolating
//! would only invent precision.

use std::time::Duration;

/// Samples in a unit chosen by the caller (milliseconds, jobs/s, …).
#[derive(Debug, Clone, Default)]
pub struct Samples(Vec<f64>);

impl Samples {
    /// Adds one sample.
    pub fn push(&mut self, value: f64) {
        self.0.push(value);
    }

    /// Adds a duration as milliseconds.
    pub fn push_ms(&mut self, d: Duration) {
        self.0.push(d.as_secs_f64() * 1e3);
    }

    /// Adds a duration as microseconds.
    pub fn push_us(&mut self, d: Duration) {
        self.0.push(d.as_secs_f64() * 1e6);
    }

    /// How many samples there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    /// The median (mean of the two middle samples for an even count); NaN when empty.
    pub fn median(&self) -> f64 {
        let v = self.sorted();
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }

    /// The `p`-th percentile by nearest rank (`p` in 0..=100); NaN when empty.
    pub fn percentile(&self, p: f64) -> f64 {
        let v = self.sorted();
        if v.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
        v[rank.clamp(1, v.len()) - 1]
    }

    /// The 99th percentile.
    pub fn p99(&self) -> f64 {
        self.percentile(99.0)
    }

    /// The 90th percentile.
    pub fn p90(&self) -> f64 {
        self.percentile(90.0)
    }

    /// Every sample plus `offset`: the distribution of a time once a constant
    /// part (e.g. the median rtt of `ping`, the transport alone) is taken off.
    /// Order statistics move with it: `shifted(x).median() == median() + x`.
    pub fn shifted(&self, offset: f64) -> Samples {
        Samples(self.0.iter().map(|v| v + offset).collect())
    }

    /// Every sample, in measurement order.
    pub fn raw(&self) -> &[f64] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Samples;
    use std::time::Duration;

    fn of(values: &[f64]) -> Samples {
        let mut s = Samples::default();
        for &v in values {
            s.push(v);
        }
        s
    }

    #[test]
    fn median_of_an_odd_count_is_the_middle_sample() {
        assert_eq!(of(&[5.0, 1.0, 3.0]).median(), 3.0);
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(of(&[4.0, 1.0, 3.0, 2.0]).median(), 2.5);
    }

    #[test]
    fn p99_of_a_hundred_samples_is_the_99th_smallest() {
        let s = of(&(1..=100).map(f64::from).collect::<Vec<_>>());
        assert_eq!(s.p99(), 99.0);
    }

    #[test]
    fn p99_of_few_samples_is_the_maximum() {
        assert_eq!(of(&[1.0, 9.0, 2.0]).p99(), 9.0);
    }

    #[test]
    fn p90_of_ten_samples_is_the_9th_smallest() {
        let s = of(&[10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0]);
        assert_eq!(s.p90(), 9.0);
    }

    #[test]
    fn shifting_moves_every_order_statistic_by_the_offset() {
        let s = of(&[0.9, 0.5, 0.7, 0.6, 0.8]);
        let net = s.shifted(-0.25);
        assert_eq!(net.len(), s.len());
        assert!((net.median() - (s.median() - 0.25)).abs() < 1e-12);
        assert!((net.p90() - (s.p90() - 0.25)).abs() < 1e-12);
        assert!((net.p99() - (s.p99() - 0.25)).abs() < 1e-12);
    }

    #[test]
    fn shifting_keeps_measurement_order() {
        assert_eq!(of(&[3.0, 1.0, 2.0]).shifted(1.0).raw(), &[4.0, 2.0, 3.0]);
    }

    #[test]
    fn microseconds_and_milliseconds_describe_the_same_duration() {
        let mut us = Samples::default();
        us.push_us(Duration::from_micros(1500));
        let mut ms = Samples::default();
        ms.push_ms(Duration::from_micros(1500));
        assert!((us.median() - 1500.0).abs() < 1e-9);
        assert!((ms.median() - 1.5).abs() < 1e-12);
    }

    #[test]
    fn statistics_of_no_samples_are_nan() {
        assert!(Samples::default().median().is_nan());
        assert!(Samples::default().p99().is_nan());
    }
}
