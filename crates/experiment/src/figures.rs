//! The papers' figures from the periodic-preemption results: what each bar is, normalised
//! the way papers/lin-lightweight §V normalises it, with a geometric-mean row. A figure
//! whose mechanisms were not run is left out.

use serde::Serialize;

use crate::periodic::{MechanismRun, PeriodicResults};

/// One figure: for each category (a kernel, then "geomean"), for each series (a bar), the
/// stacked parts of the bar.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figure {
    /// Short name, used for file names (`fig14`).
    pub id: String,
    pub title: String,
    pub y_label: String,
    pub series: Vec<String>,
    pub parts: Vec<String>,
    pub rows: Vec<Row>,
    /// The paper's headline number for this figure, to compare with.
    pub paper: String,
    /// Where a plot's axis stops; taller bars are cut there and labelled with their value
    /// (SM draining can be 50 times the baseline).
    pub clip: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub category: String,
    /// `[series][part]`.
    pub values: Vec<Vec<f64>>,
}

impl Row {
    pub fn total(&self, series: usize) -> f64 {
        self.values[series].iter().sum()
    }
}

impl Figure {
    /// The geometric-mean row, when there is one.
    pub fn geomean(&self) -> Option<&Row> {
        self.rows.iter().find(|r| r.category == "geomean")
    }

    /// Appends the geometric-mean row: each series' total is the geometric mean of its
    /// totals over the rows (rows with a zero total left out), split into parts in the
    /// average proportions.
    pub(crate) fn with_geomean(mut self) -> Figure {
        if self.rows.is_empty() {
            return self;
        }
        let mut values = Vec::new();
        for s in 0..self.series.len() {
            let totals: Vec<f64> = self
                .rows
                .iter()
                .map(|r| r.total(s))
                .filter(|&t| t > 0.0 && t.is_finite())
                .collect();
            let g = geomean(&totals);
            let mut share = vec![0.0; self.parts.len()];
            for r in &self.rows {
                let t = r.total(s);
                if t > 0.0 && t.is_finite() {
                    for (sh, v) in share.iter_mut().zip(&r.values[s]) {
                        *sh += v / t / totals.len() as f64;
                    }
                }
            }
            values.push(share.iter().map(|sh| sh * g).collect());
        }
        self.rows.push(Row {
            category: "geomean".into(),
            values,
        });
        self
    }
}

/// The geometric mean (0 for no values).
pub fn geomean(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

/// The runs of each mechanism named, per kernel, where all exist and have signals.
fn per_kernel<'a>(
    r: &'a PeriodicResults,
    mechanisms: &[&str],
) -> Option<Vec<(String, Vec<&'a MechanismRun>)>> {
    if !mechanisms
        .iter()
        .all(|m| r.mechanisms.iter().any(|x| x == m))
    {
        return None;
    }
    Some(
        r.kernels
            .iter()
            .filter_map(|k| {
                let runs: Option<Vec<&MechanismRun>> =
                    mechanisms.iter().map(|m| r.run(k, m)).collect();
                let runs = runs?;
                runs.iter()
                    .all(|x| !x.signals.is_empty())
                    .then(|| (k.clone(), runs))
            })
            .collect(),
    )
}

/// Figure 14: spill latency, normalised to spilling every occupied register (baseline),
/// split by what is spilled.
pub fn spill_latency(r: &PeriodicResults) -> Option<Figure> {
    // A kernel without preemption points drains under the point-based designs: nothing is
    // spilled, and the comparison says nothing.
    let rows = per_kernel(r, &["baseline", "points-live", "lightweight"])?
        .into_iter()
        .filter(|(_, runs)| {
            runs[0].summary.mean_spill > 0.0
                && runs
                    .iter()
                    .all(|m| m.signals.iter().any(|g| g.switched > 0))
        })
        .map(|(k, runs)| {
            let base = runs[0].summary.mean_spill;
            Row {
                category: k,
                values: runs
                    .iter()
                    .map(|m| {
                        m.summary
                            .mean_spill_parts
                            .iter()
                            .map(|p| p / base)
                            .collect()
                    })
                    .collect(),
            }
        })
        .collect();
    Some(
        Figure {
            id: "fig14".into(),
            title: "Normalised spill latency".into(),
            y_label: "spill latency / Occup".into(),
            series: vec!["Occup".into(), "Live".into(), "Live+cp".into()],
            parts: vec![
                "registers".into(),
                "shared memory".into(),
                "SIMT stack".into(),
            ],
            rows,
            paper: "Live+cp: 17.7% of Occup (geometric mean); 9.9 µs → 1.8 µs".into(),
            clip: None,
        }
        .with_geomean(),
    )
}

/// Figure 15: preemption latency, normalised to the baseline switch, split into drain and
/// spill.
pub fn preemption_latency(r: &PeriodicResults) -> Option<Figure> {
    let rows = per_kernel(r, &["baseline", "lightweight", "drain"])?
        .into_iter()
        .filter(|(_, runs)| runs[0].summary.mean_latency > 0.0)
        .map(|(k, runs)| {
            let base = runs[0].summary.mean_latency;
            Row {
                category: k,
                values: runs
                    .iter()
                    .map(|m| vec![m.summary.mean_drain / base, m.summary.mean_spill / base])
                    .collect(),
            }
        })
        .collect();
    Some(
        Figure {
            id: "fig15".into(),
            title: "Normalised preemption latency".into(),
            y_label: "preemption latency / Occup".into(),
            series: vec!["Occup".into(), "Select".into(), "SM-draining".into()],
            parts: vec!["drain".into(), "spill".into()],
            rows,
            clip: Some(3.0),
            paper: "Select: 40.3% of Occup (−59.7%), 9.9 µs → 4.0 µs; drain 55.8% of Select; SM-draining up to 1431 µs (LK)".into(),
        }
        .with_geomean(),
    )
}

/// Figure 16: worst-case preemption latency over the average, for kernels that ran long
/// enough for 15 signals under every mechanism.
pub fn worst_case(r: &PeriodicResults) -> Option<Figure> {
    let rows = per_kernel(r, &["baseline", "lightweight", "drain"])?
        .into_iter()
        .filter(|(_, runs)| runs.iter().all(|m| m.signals.len() >= 15))
        .map(|(k, runs)| Row {
            category: k,
            values: runs
                .iter()
                .map(|m| vec![m.summary.max_latency as f64 / m.summary.mean_latency.max(1e-9)])
                .collect(),
        })
        .collect();
    Some(
        Figure {
            id: "fig16".into(),
            title: "Worst-case preemption latency over the average".into(),
            y_label: "worst / average".into(),
            series: vec!["Occup".into(), "Select".into(), "SM-draining".into()],
            parts: vec!["worst / average".into()],
            rows,
            paper: "worst / average: Occup 1.4×, Select 1.6×, SM-draining 2.4×".into(),
            clip: None,
        }
        .with_geomean(),
    )
}

/// Figure 6: register context size, normalised to every occupied register: live at any
/// instruction (LIVE), live at preemption points, compressed at warp level, compressed at
/// TB level where a TB stops at a `bar.pp`.
pub fn register_context(r: &PeriodicResults) -> Option<Figure> {
    let rows = per_kernel(r, &["live", "lightweight", "lightweight-tb"])?
        .into_iter()
        .filter(|(_, runs)| runs.iter().all(|m| m.summary.registers.occupied > 0))
        .map(|(k, runs)| {
            let frac = |m: &MechanismRun, x: u64| x as f64 / m.summary.registers.occupied as f64;
            let (live, light, tb) = (runs[0], runs[1], runs[2]);
            Row {
                category: k,
                values: vec![
                    vec![1.0],
                    vec![frac(live, live.summary.registers.live)],
                    vec![frac(light, light.summary.registers.live)],
                    vec![frac(light, light.summary.registers.moved)],
                    vec![frac(tb, tb.summary.registers.moved)],
                ],
            }
        })
        .collect();
    Some(
        Figure {
            id: "fig6".into(),
            title: "Normalised register context size".into(),
            y_label: "register bytes / occupied".into(),
            series: vec![
                "Occupied".into(),
                "Live (any PC)".into(),
                "Live (points)".into(),
                "Live+cp (warp)".into(),
                "Live+cp (TB)".into(),
            ],
            parts: vec!["registers".into()],
            rows,
            paper: "liveness −34.3%; liveness + warp-level compression −91.5%; TB-level a further −36.1% where it applies".into(),
            clip: None,
        }
        .with_geomean(),
    )
}

/// Figure 8: how the live 32-bit vector registers compress at warp level.
pub fn register_patterns(r: &PeriodicResults) -> Option<Figure> {
    if !r.mechanisms.iter().any(|m| m == "lightweight") {
        return None;
    }
    let rows: Vec<Row> = r
        .kernels
        .iter()
        .filter_map(|k| {
            let c = r.run(k, "lightweight")?.summary.registers;
            let n = f64::from(c.uniform + c.strided + c.random);
            (n > 0.0).then(|| Row {
                category: k.clone(),
                values: vec![vec![
                    f64::from(c.uniform) / n,
                    f64::from(c.strided) / n,
                    f64::from(c.random) / n,
                ]],
            })
        })
        .collect();
    Some(Figure {
        id: "fig8".into(),
        title: "Warp-level register value patterns".into(),
        y_label: "share of live vector registers".into(),
        series: vec!["Live+cp".into()],
        parts: vec!["uniform".into(), "strided".into(), "random".into()],
        rows,
        paper: "BP: 47.4% uniform, 52.6% strided".into(),
        clip: None,
    })
}

/// Every figure the results allow.
pub fn all(r: &PeriodicResults) -> Vec<Figure> {
    [
        register_context(r),
        register_patterns(r),
        spill_latency(r),
        preemption_latency(r),
        worst_case(r),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A figure as CSV: `category,series,part,value`.
pub fn to_csv(f: &Figure) -> String {
    let mut out = String::from("category,series,part,value\n");
    for r in &f.rows {
        for (s, parts) in f.series.iter().zip(&r.values) {
            for (p, v) in f.parts.iter().zip(parts) {
                out.push_str(&format!("{},{},{},{v:.6}\n", r.category, s, p));
            }
        }
    }
    out
}

/// A figure as a text table: each bar's total per row.
pub fn to_table(f: &Figure) -> String {
    let mut out = format!("{} ({})\n", f.title, f.y_label);
    out.push_str(&format!("{:<14}", ""));
    for s in &f.series {
        out.push_str(&format!("{s:>16}"));
    }
    out.push('\n');
    for r in &f.rows {
        out.push_str(&format!("{:<14}", r.category));
        for s in 0..f.series.len() {
            if f.parts.len() > 1 && f.id == "fig8" {
                let v = &r.values[s];
                out.push_str(&format!(
                    "{:>16}",
                    format!(
                        "{:.0}/{:.0}/{:.0}%",
                        v[0] * 100.0,
                        v[1] * 100.0,
                        v[2] * 100.0
                    )
                ));
            } else {
                out.push_str(&format!("{:>16.3}", r.total(s)));
            }
        }
        out.push('\n');
    }
    out.push_str(&format!("paper: {}\n", f.paper));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geomean_row_splits_the_mean_total_by_average_shares() {
        let f = Figure {
            id: "t".into(),
            title: String::new(),
            y_label: String::new(),
            series: vec!["a".into()],
            parts: vec!["x".into(), "y".into()],
            rows: vec![
                Row {
                    category: "k1".into(),
                    values: vec![vec![1.0, 1.0]],
                },
                Row {
                    category: "k2".into(),
                    values: vec![vec![8.0, 0.0]],
                },
            ],
            paper: String::new(),
            clip: None,
        }
        .with_geomean();
        let g = f.geomean().unwrap();
        // Totals 2 and 8: geometric mean 4; shares (0.5 + 1) / 2 and (0.5 + 0) / 2.
        assert!((g.total(0) - 4.0).abs() < 1e-9);
        assert!((g.values[0][0] - 3.0).abs() < 1e-9);
        assert!((g.values[0][1] - 1.0).abs() < 1e-9);
        assert_eq!(geomean(&[]), 0.0);
    }
}
