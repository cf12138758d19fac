//! Figures against their targets: the markdown table and the JSON document.
//!
//! A [`Figure`] is one row: the server's median, p90 and p99, its baseline (when
//! the figure has one), their ratio, and the target of issue 5 with whether
//! this run met it. Targets are goals, never assertions: `met` never changes
//! the exit code.
//!
//! For latencies the p90 and p99 columns are the slow tail (90th and 99th
//! percentiles); for rates (MiB/s, jobs/s) they are the 10th and 1st
//! percentiles, which are the slow tail too.

use serde_json::{Map, Value, json};

use crate::stats::Samples;

/// Statistics of a baseline.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// What the baseline is.
    pub what: &'static str,
    /// Median.
    pub median: f64,
    /// Slow tail (see the module doc).
    pub p99: f64,
    /// Samples.
    pub n: usize,
}

/// One row of the report.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Key in the JSON document.
    pub key: &'static str,
    /// Row label.
    pub label: String,
    /// Unit of `median`, `p99` and the baseline.
    pub unit: &'static str,
    /// Samples behind the median.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// Slow tail (90th), for distributions.
    pub p90: Option<f64>,
    /// Slow tail (99th), for distributions.
    pub p99: Option<f64>,
    /// The physical baseline, when there is one.
    pub baseline: Option<Baseline>,
    /// Figure / baseline (medians).
    pub ratio: Option<f64>,
    /// p99 / baseline median, where the target bounds it; in the A/B
    /// figures of `--compare` (see `crate::compare`), p99 / the other build's p99.
    pub p99_ratio: Option<f64>,
    /// The target, as text.
    pub target: &'static str,
    /// Whether the target was met (`None`: no target).
    pub met: Option<bool>,
}

impl Figure {
    fn plain(key: &'static str, label: impl Into<String>, unit: &'static str) -> Figure {
        Figure {
            key,
            label: label.into(),
            unit,
            n: 1,
            median: f64::NAN,
            p90: None,
            p99: None,
            baseline: None,
            ratio: None,
            p99_ratio: None,
            target: "—",
            met: None,
        }
    }

    /// A latency distribution (ms) with an optional absolute target on its median.
    pub fn latency(
        key: &'static str,
        label: impl Into<String>,
        s: &Samples,
        target: Option<(&'static str, f64)>,
    ) -> Figure {
        Figure::latency_in(key, label, "ms", s, target)
    }

    /// A latency distribution in `unit` (the samples' unit) with an optional
    /// absolute target on its median.
    pub fn latency_in(
        key: &'static str,
        label: impl Into<String>,
        unit: &'static str,
        s: &Samples,
        target: Option<(&'static str, f64)>,
    ) -> Figure {
        let mut f = Figure::plain(key, label, unit);
        f.n = s.len();
        f.median = s.median();
        f.p90 = Some(s.p90());
        f.p99 = Some(s.p99());
        if let Some((text, max)) = target {
            f.target = text;
            f.met = Some(f.median <= max);
        }
        f
    }

    /// A latency distribution (ms) with a latency baseline.
    pub fn latency_vs(
        key: &'static str,
        label: impl Into<String>,
        s: &Samples,
        base: &Samples,
        what: &'static str,
    ) -> Figure {
        let mut f = Figure::latency(key, label, s, None);
        f.baseline = Some(Baseline {
            what,
            median: base.median(),
            p99: base.p99(),
            n: base.len(),
        });
        f.ratio = Some(f.median / base.median());
        f
    }

    /// A rate distribution (higher is better) with a rate baseline; the
    /// target is a minimum ratio to the baseline.
    pub fn rate_vs(
        key: &'static str,
        label: impl Into<String>,
        unit: &'static str,
        s: &Samples,
        base: &Samples,
        what: &'static str,
        target: (&'static str, f64),
    ) -> Figure {
        let mut f = Figure::plain(key, label, unit);
        f.n = s.len();
        f.median = s.median();
        f.p90 = Some(s.percentile(10.0));
        f.p99 = Some(s.percentile(1.0));
        f.baseline = Some(Baseline {
            what,
            median: base.median(),
            p99: base.percentile(1.0),
            n: base.len(),
        });
        let ratio = f.median / base.median();
        f.ratio = Some(ratio);
        f.target = target.0;
        f.met = Some(ratio >= target.1);
        f
    }

    /// A single value with an optional maximum.
    pub fn value(
        key: &'static str,
        label: impl Into<String>,
        unit: &'static str,
        v: f64,
        target: Option<(&'static str, f64)>,
    ) -> Figure {
        let mut f = Figure::plain(key, label, unit);
        f.median = v;
        if let Some((text, max)) = target {
            f.target = text;
            f.met = Some(v <= max);
        }
        f
    }

    /// A single value against another build's (or setting's) value of the
    /// same figure; the ratio is `v / base`.
    pub fn value_vs(
        key: &'static str,
        label: impl Into<String>,
        unit: &'static str,
        v: f64,
        base: f64,
        what: &'static str,
    ) -> Figure {
        let mut f = Figure::plain(key, label, unit);
        f.median = v;
        f.baseline = Some(Baseline {
            what,
            median: base,
            p99: base,
            n: 1,
        });
        f.ratio = Some(v / base);
        f
    }

    /// A single value with a minimum (a count that must be reached).
    pub fn value_at_least(
        key: &'static str,
        label: impl Into<String>,
        unit: &'static str,
        v: f64,
        (text, min): (&'static str, f64),
    ) -> Figure {
        let mut f = Figure::plain(key, label, unit);
        f.median = v;
        f.target = text;
        f.met = Some(v >= min);
        f
    }

    /// A figure this run could not measure: no value, the target kept, and
    /// neither met nor missed; the label says why.
    pub fn skipped(
        key: &'static str,
        label: impl Into<String>,
        unit: &'static str,
        target: &'static str,
    ) -> Figure {
        let mut f = Figure::plain(key, label, unit);
        f.target = target;
        f
    }

    /// Sets an absolute maximum on the median.
    pub fn with_target(mut self, text: &'static str, max: f64) -> Figure {
        self.target = text;
        self.met = Some(self.median <= max);
        self
    }

    /// Adds a maximum on the p99 to a target set on the median: met only if both hold.
    pub fn with_p99_max(mut self, max: f64) -> Figure {
        let p99_ok = self.p99.is_some_and(|p| p <= max);
        self.met = self.met.map(|m| m && p99_ok);
        self
    }

    /// Sets a target of `median ≤ baseline median + offset` (same unit).
    pub fn with_offset_target(mut self, text: &'static str, offset: f64) -> Figure {
        let base = self.baseline.as_ref().map_or(f64::NAN, |b| b.median);
        self.target = text;
        self.met = Some(self.median <= base + offset);
        self
    }

    /// Sets the target of a figure bounded by one ratio to its baseline:
    /// `median ≤ m × baseline median`.
    pub fn with_ratio_target(mut self, text: &'static str, m: f64) -> Figure {
        self.target = text;
        self.met = Some(self.ratio.is_some_and(|r| r <= m));
        self
    }

    /// Sets the target of a figure bounded by ratios to its baseline median:
    /// `median ≤ m × baseline` and `p99 ≤ p × baseline`.
    pub fn with_ratio_targets(mut self, text: &'static str, m: f64, p: f64) -> Figure {
        let base = self.baseline.as_ref().map_or(f64::NAN, |b| b.median);
        let p99_ratio = self.p99.unwrap_or(f64::NAN) / base;
        self.p99_ratio = Some(p99_ratio);
        self.target = text;
        self.met = Some(self.median / base <= m && p99_ratio <= p);
        self
    }

    fn json(&self) -> Value {
        json!({
            "label": self.label,
            "unit": self.unit,
            "n": self.n,
            "median": self.median,
            "p90": self.p90,
            "p99": self.p99,
            "baseline": self.baseline.as_ref().map(|b| json!({
                "what": b.what, "median": b.median, "p99": b.p99, "n": b.n,
            })),
            "ratio": self.ratio,
            "p99_ratio": self.p99_ratio,
            "target": self.target,
            "met": self.met,
        })
    }
}

/// A number with as many decimals as its size deserves.
pub fn num(v: f64) -> String {
    if v.is_nan() {
        "—".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The markdown table.
pub fn markdown(figures: &[Figure]) -> String {
    let mut s = String::from(
        "| figure | median | p90 | p99 | baseline (median) | ratio | target | met? |\n\
         |---|---:|---:|---:|---:|---:|---|---|\n",
    );
    for f in figures {
        let p90 = f.p90.map_or_else(|| "—".into(), num);
        let p99 = f.p99.map_or_else(|| "—".into(), num);
        let base = f.baseline.as_ref().map_or_else(
            || "—".into(),
            |b| format!("{} {} ({})", num(b.median), f.unit, b.what),
        );
        let ratio = match (f.ratio, f.p99_ratio) {
            (Some(r), Some(p)) => format!("{}× (p99 {}×)", num(r), num(p)),
            (Some(r), None) => format!("{}×", num(r)),
            (None, _) => "—".into(),
        };
        let met = match f.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "—",
        };
        let label = if f.p99.is_some() {
            format!("{} (n={})", f.label, f.n)
        } else {
            f.label.clone()
        };
        s.push_str(&format!(
            "| {} | {} {} | {} | {} | {} | {} | {} | {} |\n",
            label,
            num(f.median),
            f.unit,
            p90,
            p99,
            base,
            ratio,
            f.target,
            met
        ));
    }
    s
}

/// The JSON document: `context` (machine, plan, notes) plus `figures` by key.
pub fn json(context: Map<String, Value>, figures: &[Figure]) -> Value {
    let mut doc = context;
    let by_key: Map<String, Value> = figures
        .iter()
        .map(|f| (f.key.to_owned(), f.json()))
        .collect();
    doc.insert("figures".into(), Value::Object(by_key));
    Value::Object(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(values: &[f64]) -> Samples {
        let mut s = Samples::default();
        for &v in values {
            s.push(v);
        }
        s
    }

    #[test]
    fn rate_figures_meet_a_minimum_ratio_to_their_baseline() {
        let f = Figure::rate_vs(
            "t",
            "t",
            "MiB/s",
            &samples(&[60.0]),
            &samples(&[100.0]),
            "b",
            ("≥ 0.5×", 0.5),
        );
        assert_eq!(f.met, Some(true));
        let f = Figure::rate_vs(
            "t",
            "t",
            "MiB/s",
            &samples(&[40.0]),
            &samples(&[100.0]),
            "b",
            ("≥ 0.5×", 0.5),
        );
        assert_eq!(f.met, Some(false));
    }

    #[test]
    fn ratio_targets_need_both_the_median_and_the_tail() {
        let fast_tail_slow = Figure::latency_vs(
            "r",
            "r",
            &samples(&[1.0, 1.0, 1.0, 10.0]),
            &samples(&[1.0]),
            "b",
        )
        .with_ratio_targets("x", 1.3, 3.0);
        assert_eq!(fast_tail_slow.met, Some(false));
        let both_fine = Figure::latency_vs("r", "r", &samples(&[1.2, 1.2]), &samples(&[1.0]), "b")
            .with_ratio_targets("x", 1.3, 3.0);
        assert_eq!(both_fine.met, Some(true));
    }

    #[test]
    fn a_single_ratio_target_bounds_the_median_ratio_only() {
        let slow_tail = Figure::latency_vs(
            "r",
            "r",
            &samples(&[1.0, 1.0, 1.0, 10.0, 1.2]),
            &samples(&[1.0]),
            "b",
        )
        .with_ratio_target("x", 1.3);
        assert_eq!(slow_tail.met, Some(true));
        let slow = Figure::latency_vs("r", "r", &samples(&[1.4]), &samples(&[1.0]), "b")
            .with_ratio_target("x", 1.3);
        assert_eq!(slow.met, Some(false));
    }

    #[test]
    fn latency_rows_quote_the_90th_percentile() {
        let values: Vec<f64> = (1..=10).map(f64::from).collect();
        let f = Figure::latency_in("l", "l", "µs", &samples(&values), None);
        assert_eq!(f.p90, Some(9.0));
        assert_eq!(f.unit, "µs");
        let row = markdown(&[f]);
        assert!(row.contains("| 5.50 µs | 9.00 | 10.0 |"), "{row}");
    }

    #[test]
    fn a_count_below_its_minimum_is_a_miss() {
        let all = Figure::value_at_least("c", "c", "jobs", 10.0, ("all 10", 10.0));
        assert_eq!(all.met, Some(true));
        let some = Figure::value_at_least("c", "c", "jobs", 9.0, ("all 10", 10.0));
        assert_eq!(some.met, Some(false));
    }

    #[test]
    fn a_skipped_figure_is_neither_met_nor_missed() {
        let f = Figure::skipped("s", "s (skipped: why)", "ms", "≤ 5 ms");
        assert_eq!(f.met, None);
        let row = markdown(&[f]);
        assert!(row.contains("| — ms |"), "{row}");
        assert!(row.contains("| ≤ 5 ms | — |"), "{row}");
    }

    #[test]
    fn the_table_has_one_row_per_figure_and_marks_misses() {
        let figures = [
            Figure::value("a", "size", "MiB", 3.0, Some(("≤ 2 MiB", 2.0))),
            Figure::value("b", "idle", "MiB", 1.0, Some(("≤ 2 MiB", 2.0))),
        ];
        let table = markdown(&figures);
        assert_eq!(table.lines().count(), 4);
        assert!(table.contains("| **no** |"));
        assert!(table.contains("| yes |"));
    }
}
