//! Inline SVG charts: bar charts and scatter plots, no scripts, no external assets.

use std::fmt::Write;

const W: f64 = 560.0;
const H: f64 = 240.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;

/// Escapes text for HTML and SVG.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn frame(title: &str, y_max: f64, y_fmt: &dyn Fn(f64) -> String) -> String {
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"10\" role=\"img\"><title>{t}</title>\
         <text x=\"{LEFT}\" y=\"16\" font-size=\"12\" font-weight=\"bold\">{t}</text>",
        t = escape(title)
    );
    let plot_h = H - TOP - BOTTOM;
    for i in 0..=4 {
        let y = TOP + plot_h * (1.0 - f64::from(i) / 4.0);
        let v = y_max * f64::from(i) / 4.0;
        let _ = write!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 4.0,
            y + 3.0,
            escape(&y_fmt(v))
        );
    }
    s
}

/// A bar chart of `values` labelled by `labels` (labels thinned when crowded).
pub fn bars(
    title: &str,
    labels: &[String],
    values: &[f64],
    y_fmt: &dyn Fn(f64) -> String,
) -> String {
    let y_max = nice_max(values.iter().copied().fold(0.0, f64::max));
    let mut s = frame(title, y_max, y_fmt);
    let n = values.len().max(1);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let slot = plot_w / n as f64;
    let every = n.div_ceil(16);
    for (i, v) in values.iter().enumerate() {
        let h = if y_max > 0.0 { v / y_max * plot_h } else { 0.0 };
        let x = LEFT + slot * i as f64;
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#4c78a8\">\
             <title>{}: {}</title></rect>",
            x + slot * 0.1,
            TOP + plot_h - h,
            slot * 0.8,
            escape(labels.get(i).map_or("", String::as_str)),
            escape(&y_fmt(*v))
        );
        if i % every == 0 {
            let label = labels.get(i).map_or("", String::as_str);
            let short: String = label.chars().take(14).collect();
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x + slot / 2.0,
                H - BOTTOM + 14.0,
                escape(&short)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// A scatter plot of (x, y) points with axis captions.
pub fn scatter(title: &str, points: &[(f64, f64)], x_caption: &str, y_caption: &str) -> String {
    let x_max = nice_max(points.iter().map(|p| p.0).fold(0.0, f64::max));
    let y_max = nice_max(points.iter().map(|p| p.1).fold(0.0, f64::max));
    let mut s = frame(title, y_max, &|v| format!("{v:.0}"));
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    for (x, y) in points {
        let cx = LEFT + if x_max > 0.0 { x / x_max * plot_w } else { 0.0 };
        let cy = TOP + plot_h - if y_max > 0.0 { y / y_max * plot_h } else { 0.0 };
        let _ = write!(
            s,
            "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"1.6\" fill=\"#e45756\" fill-opacity=\"0.6\"/>"
        );
    }
    for i in 0..=4 {
        let v = x_max * f64::from(i) / 4.0;
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{v:.1}</text>",
            LEFT + plot_w * f64::from(i) / 4.0,
            H - BOTTOM + 14.0
        );
    }
    let _ = write!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\
         <text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text></svg>",
        LEFT + plot_w / 2.0,
        H - 8.0,
        escape(x_caption),
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(y_caption)
    );
    s
}

/// A round upper bound for an axis.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
        if v <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_wellformed_and_escaped() {
        let b = bars("a<b", &["w&1".into(), "w2".into()], &[3.0, 5.0], &|v| {
            format!("{v}")
        });
        assert!(b.starts_with("<svg") && b.ends_with("</svg>"));
        assert!(b.contains("a&lt;b") && b.contains("w&amp;1"));
        assert_eq!(b.matches("<rect").count(), 2);
        let s = scatter("t", &[(1.0, 2.0), (3.0, 4.0)], "x", "y");
        assert_eq!(s.matches("<circle").count(), 2);
        assert_eq!(nice_max(7.3), 8.0);
        assert_eq!(nice_max(125.0), 150.0);
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(180.0), 200.0);
    }
}
