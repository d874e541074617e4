//! A figure as an SVG bar chart: one group of bars per category, one bar per series, each
//! bar stacked from its parts (the part shown by shade). Plain SVG 1.1, no scripts, so any
//! browser or vector editor opens it.

use std::fmt::Write;

use crate::figures::Figure;

const PALETTE: [&str; 6] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1",
];
/// Opacity of each stacked part, bottom first.
const SHADES: [f64; 4] = [1.0, 0.6, 0.35, 0.2];

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round upper bound for the axis: 1, 2 or 5 times a power of ten.
fn axis_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&v| v >= max * 1.0001)
        .unwrap_or(10.0 * p)
}

/// Renders `f`.
pub fn bar_chart(f: &Figure) -> String {
    let n_series = f.series.len().max(1);
    let bar = 14.0;
    let group = bar * n_series as f64 + 12.0;
    let (left, top, plot_h, bottom) = (64.0, 48.0, 260.0, 110.0);
    let width = (left + group * f.rows.len().max(1) as f64 + 24.0).max(420.0);
    let height = top + plot_h + bottom;
    let max = f
        .rows
        .iter()
        .flat_map(|r| (0..f.series.len()).map(move |s| r.total(s)))
        .fold(0.0, f64::max);
    let ymax = match f.clip {
        Some(c) if max > c => c,
        _ => axis_max(max),
    };
    let y = |v: f64| top + plot_h - plot_h * (v / ymax).min(1.0);
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(
        o,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="20" font-size="14" font-weight="bold">{}</text>"#,
        escape(&f.title)
    );
    // Axis and grid.
    for i in 0..=4 {
        let v = ymax * i as f64 / 4.0;
        let _ = writeln!(
            o,
            r##"<line x1="{left}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            width - 16.0,
            y(v),
            y(v),
            left - 4.0,
            y(v) + 4.0,
            format_tick(v)
        );
    }
    let _ = writeln!(
        o,
        r#"<text transform="translate(16 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        top + plot_h / 2.0,
        escape(&f.y_label)
    );
    for (g, row) in f.rows.iter().enumerate() {
        let x0 = left + 6.0 + group * g as f64;
        for (s, parts) in row.values.iter().enumerate() {
            let x = x0 + bar * s as f64;
            let total: f64 = parts.iter().sum();
            if total > ymax {
                // Cut at the axis; the value is written above.
                let _ = writeln!(
                    o,
                    r#"<text transform="translate({:.1} {:.1}) rotate(-90)" font-size="9">{}</text>"#,
                    x + bar / 2.0 + 3.0,
                    top - 2.0,
                    format_tick(total)
                );
            }
            let mut base = 0.0;
            for (p, &v) in parts.iter().enumerate() {
                if v <= 0.0 || !v.is_finite() {
                    continue;
                }
                let (y1, y0) = (y(base + v), y(base));
                let _ = writeln!(
                    o,
                    r#"<rect x="{x:.1}" y="{y1:.1}" width="{:.1}" height="{:.1}" fill="{}" fill-opacity="{}"><title>{} {} {}: {v:.3}</title></rect>"#,
                    bar - 1.0,
                    (y0 - y1).max(0.0),
                    PALETTE[s % PALETTE.len()],
                    SHADES[p % SHADES.len()],
                    escape(&row.category),
                    escape(&f.series[s]),
                    escape(&f.parts[p]),
                );
                base += v;
            }
        }
        let cx = x0 + bar * n_series as f64 / 2.0;
        let _ = writeln!(
            o,
            r#"<text transform="translate({cx:.1} {:.1}) rotate(-45)" text-anchor="end">{}</text>"#,
            top + plot_h + 12.0,
            escape(&row.category)
        );
    }
    let _ = writeln!(
        o,
        r#"<line x1="{left}" x2="{left}" y1="{top}" y2="{:.1}" stroke="black"/>"#,
        top + plot_h
    );
    // Legend: series by colour, parts by shade.
    let mut lx = left;
    let ly = 34.0;
    for (s, name) in f.series.iter().enumerate() {
        let _ = writeln!(
            o,
            r#"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
            ly - 9.0,
            PALETTE[s % PALETTE.len()],
            lx + 13.0,
            escape(name)
        );
        lx += 20.0 + 6.5 * name.len() as f64;
    }
    if f.parts.len() > 1 {
        for (p, name) in f.parts.iter().enumerate() {
            let _ = writeln!(
                o,
                r##"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="#555" fill-opacity="{}"/><text x="{:.1}" y="{ly:.1}">{}</text>"##,
                ly - 9.0,
                SHADES[p % SHADES.len()],
                lx + 13.0,
                escape(name)
            );
            lx += 20.0 + 6.5 * name.len() as f64;
        }
    }
    o.push_str("</svg>\n");
    o
}

fn format_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::Row;

    #[test]
    fn axis_bounds_are_round_and_cover_the_data() {
        assert_eq!(axis_max(0.8), 1.0);
        assert_eq!(axis_max(1.0), 2.0);
        assert_eq!(axis_max(3.2), 5.0);
        assert_eq!(axis_max(730.0), 1000.0);
        assert_eq!(axis_max(0.0), 1.0);
    }

    #[test]
    fn bars_are_stacked_and_scaled() {
        let f = Figure {
            id: "t".into(),
            title: "T <&>".into(),
            y_label: "y".into(),
            series: vec!["a".into(), "b".into()],
            parts: vec!["p".into(), "q".into()],
            rows: vec![Row {
                category: "k".into(),
                values: vec![vec![0.5, 0.5], vec![0.25, 0.0]],
            }],
            paper: String::new(),
            clip: None,
        };
        let svg = bar_chart(&f);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("T &lt;&amp;&gt;"), "the title is escaped");
        // Three non-empty parts: three bars; the axis tops at 2 (max total 1.0).
        assert_eq!(svg.matches("<title>").count(), 3);
        assert!(svg.contains(">2.0</text>"));
        // The 0.5 part of a plot 260 high on a 0–2 axis is 65 high.
        assert!(svg.contains(r#"height="65.0""#));
        // Clipped at 0.5: the taller bar is cut at the top and labelled with its value.
        let clipped = bar_chart(&Figure {
            clip: Some(0.5),
            ..f
        });
        assert!(clipped.contains(">1.0</text>"), "{clipped}");
        assert!(clipped.contains(r#"height="260.0""#));
    }
}
