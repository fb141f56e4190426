//! Hand-written SVG plots: line charts (linear or log axes, markers,
//! dashed reference curves, legend) and step histograms.
//!
//! Every chart has the same fixed size ([`WIDTH`] x [`HEIGHT`]), all text
//! is escaped, and non-finite numbers never reach the output: points with
//! a NaN/inf coordinate (or a non-positive one on a log axis) are left out,
//! and a chart without any drawable point shows "no data".

use std::fmt::Write;

/// Width of every chart in SVG user units (pixels at 100 % zoom).
pub const WIDTH: f64 = 720.0;
/// Height of every chart.
pub const HEIGHT: f64 = 400.0;

/// Series colors, in order (colorblind-friendly "Okabe-Ito"-like set plus
/// a few distinct extras). Series `i` uses `PALETTE[i % PALETTE.len()]`.
pub const PALETTE: [&str; 8] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#7f3c8d", "#8c564b",
];
/// Color of reference curves (the theoretical line rate).
pub const REFERENCE_COLOR: &str = "#333333";

const FONT: &str = "font-family=\"sans-serif\"";
const LEFT: f64 = 74.0;
const RIGHT: f64 = 18.0;
const TOP: f64 = 30.0;
const LEGEND_ROW: f64 = 18.0;

/// Axis scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base-10 logarithmic; the range snaps to whole decades.
    Log,
}

/// One axis: label, scale and optional fixed bounds (otherwise from the data).
#[derive(Clone, Debug)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Linear axes only: stretch the automatic range to include 0.
    pub include_zero: bool,
}

impl Axis {
    /// A linear axis starting at 0.
    pub fn linear(label: &str) -> Axis {
        Axis {
            label: label.to_string(),
            scale: Scale::Linear,
            min: None,
            max: None,
            include_zero: true,
        }
    }

    /// A base-10 log axis.
    pub fn log(label: &str) -> Axis {
        Axis {
            label: label.to_string(),
            scale: Scale::Log,
            min: None,
            max: None,
            include_zero: false,
        }
    }

    /// Fix both bounds.
    pub fn range(mut self, min: f64, max: f64) -> Axis {
        self.min = Some(min);
        self.max = Some(max);
        self
    }

    /// Do not force 0 into the range.
    pub fn no_zero(mut self) -> Axis {
        self.include_zero = false;
        self
    }
}

/// Marker drawn at each point of a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    None,
    Circle,
    Square,
    Triangle,
    Diamond,
}

impl Marker {
    /// Marker for series number `i` (cycles through the shapes).
    pub fn nth(i: usize) -> Marker {
        [
            Marker::Circle,
            Marker::Square,
            Marker::Triangle,
            Marker::Diamond,
        ][i % 4]
    }
}

/// One series of a chart.
#[derive(Clone, Debug)]
pub struct Line {
    /// Legend text (escaped on output).
    pub name: String,
    /// CSS color, e.g. `#0072b2` (must come from trusted code, not data).
    pub color: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
    pub marker: Marker,
    /// Fill the area under the line with the color at low opacity (histograms).
    pub fill: bool,
    /// Whether the automatic axis ranges take this series into account
    /// (false for a reference curve that would squash the data).
    pub affects_range: bool,
}

impl Line {
    /// A solid line with markers.
    pub fn new(name: &str, color: &str, points: Vec<(f64, f64)>, marker: Marker) -> Line {
        Line {
            name: name.to_string(),
            color: color.to_string(),
            points,
            dashed: false,
            marker,
            fill: false,
            affects_range: true,
        }
    }
}

/// A chart: title, two axes and its series.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Unique among the charts of one HTML page (used for the clip path id);
    /// only `[A-Za-z0-9_-]` are kept.
    pub id: String,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub lines: Vec<Line>,
}

/// Escape text for XML/HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// A coordinate for the output: finite, one decimal.
fn n(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    let s = format!("{v:.1}");
    if s == "-0.0" {
        "0.0".to_string()
    } else {
        s
    }
}

fn valid(scale: Scale, v: f64) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

/// Resolved axis: range in "scale space" (log10 for log axes) and ticks.
struct Res {
    scale: Scale,
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
}

impl Res {
    fn t(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => v,
            Scale::Log => v.log10(),
        }
    }
    /// Fraction 0..1 of the axis for data value `v`.
    fn frac(&self, v: f64) -> f64 {
        let f = (self.t(v) - self.lo) / (self.hi - self.lo);
        if f.is_finite() {
            f
        } else {
            0.0
        }
    }
}

/// A "nice" step (1, 2 or 5 times a power of ten) near `span / target`.
fn nice_step(span: f64, target: f64) -> f64 {
    let raw = span / target;
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let k = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * p
}

/// Tick label: SI suffix for large values, as many decimals as the step needs.
fn tick_label(v: f64, step: f64) -> String {
    let a = v.abs();
    for (div, suf) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if a >= div * 10.0 || (a >= div && step >= div) {
            let s = tick_label(v / div, step / div);
            return format!("{s}{suf}");
        }
    }
    let dec = if step >= 1.0 || step <= 0.0 || !step.is_finite() {
        0
    } else {
        ((-step.log10()).ceil() as usize).min(6)
    };
    let s = format!("{v:.dec$}");
    if s.starts_with('-') && s.trim_start_matches(['-', '0', '.']).is_empty() {
        s[1..].to_string()
    } else {
        s
    }
}

/// `target`: about how many intervals a linear axis gets.
fn resolve(axis: &Axis, data: &[f64], target: f64) -> Res {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for &v in data {
        if valid(axis.scale, v) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    if let Some(m) = axis.min.filter(|&m| valid(axis.scale, m)) {
        lo = m;
    }
    if let Some(m) = axis.max.filter(|&m| valid(axis.scale, m)) {
        hi = m;
    }
    match axis.scale {
        Scale::Linear => {
            if !lo.is_finite() || !hi.is_finite() {
                lo = 0.0;
                hi = 1.0;
            }
            if axis.include_zero && axis.min.is_none() {
                lo = lo.min(0.0);
                hi = hi.max(0.0);
            }
            if hi <= lo {
                let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
                lo -= pad;
                hi += pad;
            }
            let step = nice_step(hi - lo, target);
            if axis.min.is_none() {
                lo = (lo / step).floor() * step;
            }
            if axis.max.is_none() {
                hi = (hi / step).ceil() * step;
            }
            let mut ticks = Vec::new();
            let mut k = (lo / step).ceil();
            while k * step <= hi + step * 1e-9 && ticks.len() < 50 {
                let v = k * step;
                ticks.push((v, tick_label(v, step)));
                k += 1.0;
            }
            Res {
                scale: Scale::Linear,
                lo,
                hi,
                ticks,
            }
        }
        Scale::Log => {
            if !lo.is_finite() || !hi.is_finite() {
                lo = 1.0;
                hi = 10.0;
            }
            let mut llo = lo.log10();
            let mut lhi = hi.log10();
            if axis.min.is_none() {
                llo = llo.floor();
            }
            if axis.max.is_none() {
                lhi = lhi.ceil();
            }
            if lhi <= llo {
                lhi = llo + 1.0;
            }
            let decades = lhi - llo;
            let mults: &[f64] = if decades <= 2.0 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            let every = (decades / 8.0).ceil().max(1.0) as i64;
            let mut ticks = Vec::new();
            let mut d = llo.floor() as i64;
            while (d as f64) <= lhi && ticks.len() < 60 {
                if d.rem_euclid(every) == 0 {
                    for &m in mults {
                        let v = m * 10f64.powi(d as i32);
                        let l = v.log10();
                        if l >= llo - 1e-9 && l <= lhi + 1e-9 {
                            ticks.push((v, tick_label(v, v)));
                        }
                    }
                }
                d += 1;
            }
            Res {
                scale: Scale::Log,
                lo: llo,
                hi: lhi,
                ticks,
            }
        }
    }
}

fn clip_id(id: &str) -> String {
    let s: String = id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    format!("clip-{}", if s.is_empty() { "chart" } else { &s })
}

fn marker_svg(out: &mut String, m: Marker, x: f64, y: f64, color: &str) {
    let r = 3.5;
    let _ = match m {
        Marker::None => Ok(()),
        Marker::Circle => write!(
            out,
            "<circle cx=\"{}\" cy=\"{}\" r=\"{r}\" fill=\"{color}\"/>",
            n(x),
            n(y)
        ),
        Marker::Square => write!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"7\" height=\"7\" fill=\"{color}\"/>",
            n(x - r),
            n(y - r)
        ),
        Marker::Triangle => write!(
            out,
            "<path d=\"M{} {}L{} {}L{} {}Z\" fill=\"{color}\"/>",
            n(x),
            n(y - 4.5),
            n(x + 4.5),
            n(y + 3.5),
            n(x - 4.5),
            n(y + 3.5)
        ),
        Marker::Diamond => write!(
            out,
            "<path d=\"M{} {}L{} {}L{} {}L{} {}Z\" fill=\"{color}\"/>",
            n(x),
            n(y - 5.0),
            n(x + 4.5),
            n(y),
            n(x),
            n(y + 5.0),
            n(x - 4.5),
            n(y)
        ),
    };
}

/// Legend layout: (line index, x, row) for each entry, and the row count.
fn legend_layout(lines: &[Line], width: f64) -> (Vec<(usize, f64, usize)>, usize) {
    let mut out = Vec::new();
    let (mut x, mut row) = (0.0, 0usize);
    for (i, l) in lines.iter().enumerate() {
        let w = 40.0 + 7.0 * l.name.chars().count().min(60) as f64;
        if x > 0.0 && x + w > width {
            x = 0.0;
            row += 1;
        }
        out.push((i, x, row));
        x += w;
    }
    let rows = if lines.is_empty() { 0 } else { row + 1 };
    (out, rows.min(6))
}

/// Render a line chart as a standalone `<svg>` element.
pub fn line_chart(c: &Chart) -> String {
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for l in c.lines.iter().filter(|l| l.affects_range) {
        for &(x, y) in &l.points {
            if valid(c.x.scale, x) && valid(c.y.scale, y) {
                xs.push(x);
                ys.push(y);
            }
        }
    }
    let has_data = c.lines.iter().any(|l| {
        l.points
            .iter()
            .any(|&(x, y)| valid(c.x.scale, x) && valid(c.y.scale, y))
    });
    let rx = resolve(&c.x, &xs, 8.0);
    let ry = resolve(&c.y, &ys, 5.0);

    let plot_w = WIDTH - LEFT - RIGHT;
    let (legend, rows) = legend_layout(&c.lines, plot_w);
    let bottom = HEIGHT - 46.0 - rows as f64 * LEGEND_ROW;
    let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, TOP, bottom);
    let px = |v: f64| x0 + rx.frac(v) * (x1 - x0);
    let py = |v: f64| y1 - ry.frac(v) * (y1 - y0);

    let mut o = String::new();
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{t}\">",
        w = WIDTH,
        h = HEIGHT,
        t = escape(&c.title)
    );
    let cid = clip_id(&c.id);
    let _ = write!(
        o,
        "<defs><clipPath id=\"{cid}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>",
        n(x0),
        n(y0),
        n(x1 - x0),
        n(y1 - y0)
    );
    let _ = write!(
        o,
        "<rect x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"#ffffff\"/>"
    );
    let _ = write!(
        o,
        "<text x=\"{}\" y=\"18\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\" {FONT}>{}</text>",
        n(WIDTH / 2.0),
        escape(&c.title)
    );
    // Grid and ticks.
    o.push_str("<g stroke=\"#e3e3e3\" stroke-width=\"1\">");
    for (v, _) in &rx.ticks {
        let x = px(*v);
        let _ = write!(
            o,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            n(x),
            n(y0),
            n(x),
            n(y1)
        );
    }
    for (v, _) in &ry.ticks {
        let y = py(*v);
        let _ = write!(
            o,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
            n(x0),
            n(y),
            n(x1),
            n(y)
        );
    }
    o.push_str("</g>");
    let _ = write!(
        o,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888888\"/>",
        n(x0),
        n(y0),
        n(x1 - x0),
        n(y1 - y0)
    );
    let _ = write!(o, "<g font-size=\"11\" fill=\"#222222\" {FONT}>");
    for (v, label) in &rx.ticks {
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            n(px(*v)),
            n(y1 + 15.0),
            escape(label)
        );
    }
    for (v, label) in &ry.ticks {
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            n(x0 - 6.0),
            n(py(*v) + 4.0),
            escape(label)
        );
    }
    o.push_str("</g>");
    // Axis labels.
    let _ = write!(
        o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" {FONT}>{}</text>",
        n((x0 + x1) / 2.0),
        n(y1 + 32.0),
        escape(&c.x.label)
    );
    let (lx, ly) = (16.0, (y0 + y1) / 2.0);
    let _ = write!(
        o,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 {} {})\" {FONT}>{}</text>",
        n(lx),
        n(ly),
        n(lx),
        n(ly),
        escape(&c.y.label)
    );
    if !has_data {
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"16\" fill=\"#999999\" {FONT}>no data</text>",
            n((x0 + x1) / 2.0),
            n((y0 + y1) / 2.0)
        );
    }
    // Series.
    let _ = write!(o, "<g clip-path=\"url(#{cid})\">");
    for l in &c.lines {
        let pts: Vec<(f64, f64)> = l
            .points
            .iter()
            .filter(|&&(x, y)| valid(c.x.scale, x) && valid(c.y.scale, y))
            .map(|&(x, y)| (px(x), py(y)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let color = escape(&l.color);
        let mut d = String::new();
        for (i, (x, y)) in pts.iter().enumerate() {
            let _ = write!(d, "{}{} {}", if i == 0 { "M" } else { "L" }, n(*x), n(*y));
        }
        if l.fill && pts.len() > 1 {
            let _ = write!(
                o,
                "<path d=\"{d}L{} {}L{} {}Z\" fill=\"{color}\" fill-opacity=\"0.15\" stroke=\"none\"/>",
                n(pts[pts.len() - 1].0),
                n(y1),
                n(pts[0].0),
                n(y1)
            );
        }
        let dash = if l.dashed {
            " stroke-dasharray=\"7 5\""
        } else {
            ""
        };
        let _ = write!(
            o,
            "<path class=\"series\" data-series=\"{}\" d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2.5\" stroke-linejoin=\"round\"{dash}/>",
            escape(&l.name)
        );
        for (x, y) in &pts {
            marker_svg(&mut o, l.marker, *x, *y, &color);
        }
    }
    o.push_str("</g>");
    // Legend below the x axis label.
    let _ = write!(o, "<g font-size=\"12\" {FONT}>");
    let ly0 = y1 + 50.0;
    for (i, x, row) in legend.into_iter().filter(|e| e.2 < 6) {
        let l = &c.lines[i];
        let color = escape(&l.color);
        let (sx, sy) = (x0 + x, ly0 + row as f64 * LEGEND_ROW);
        let dash = if l.dashed {
            " stroke-dasharray=\"7 5\""
        } else {
            ""
        };
        let _ = write!(
            o,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{color}\" stroke-width=\"2.5\"{dash}/>",
            n(sx),
            n(sy - 4.0),
            n(sx + 28.0),
            n(sy - 4.0)
        );
        marker_svg(&mut o, l.marker, sx + 14.0, sy - 4.0, &color);
        let _ = write!(
            o,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            n(sx + 34.0),
            n(sy),
            escape(&l.name)
        );
    }
    o.push_str("</g></svg>");
    o
}

/// One histogram: buckets as (lower bound, count), sorted or not.
#[derive(Clone, Debug)]
pub struct Hist {
    pub name: String,
    pub color: String,
    pub buckets: Vec<(f64, f64)>,
}

/// Turn buckets (lower bound, count) into the outline of a step histogram:
/// each bucket ends where the next begins; the last one is as wide as the
/// one before it (or 1 if it is alone). `normalize` divides by the total
/// (y in percent of samples). Invalid buckets are dropped.
pub fn step_points(buckets: &[(f64, f64)], normalize: bool, log_x: bool) -> Vec<(f64, f64)> {
    let mut b: Vec<(f64, f64)> = buckets
        .iter()
        .copied()
        .filter(|&(x, c)| x.is_finite() && c.is_finite() && c >= 0.0 && (!log_x || x > 0.0))
        .collect();
    b.sort_by(|a, c| a.0.total_cmp(&c.0));
    b.dedup_by(|a, c| a.0 == c.0);
    if b.is_empty() {
        return Vec::new();
    }
    let total: f64 = b.iter().map(|x| x.1).sum();
    let scale = if normalize && total > 0.0 {
        100.0 / total
    } else {
        1.0
    };
    let mut out = Vec::with_capacity(b.len() * 2 + 2);
    for (i, &(x, c)) in b.iter().enumerate() {
        let end = if i + 1 < b.len() {
            b[i + 1].0
        } else if i > 0 {
            if log_x {
                x * (x / b[i - 1].0)
            } else {
                x + (x - b[i - 1].0)
            }
        } else if log_x {
            x * 2.0
        } else {
            x + 1.0
        };
        if i == 0 {
            out.push((x, 0.0));
        }
        out.push((x, c * scale));
        out.push((end, c * scale));
        if i + 1 == b.len() {
            out.push((end, 0.0));
        }
    }
    out
}

/// A step histogram of several series (y in percent of each series' samples,
/// so series with different sample counts compare).
pub fn histogram_chart(id: &str, title: &str, x: Axis, hists: &[Hist]) -> String {
    let log_x = x.scale == Scale::Log;
    let lines = hists
        .iter()
        .map(|h| Line {
            name: h.name.clone(),
            color: h.color.clone(),
            points: step_points(&h.buckets, true, log_x),
            dashed: false,
            marker: Marker::None,
            fill: true,
            affects_range: true,
        })
        .collect();
    line_chart(&Chart {
        id: id.to_string(),
        title: title.to_string(),
        x,
        y: Axis::linear("samples (%)"),
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(s: &str) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(s).unwrap_or_else(|e| panic!("not well-formed: {e}\n{s}"))
    }

    #[test]
    fn line_chart_is_xml_with_a_path_per_series() {
        let c = Chart {
            id: "t1".into(),
            title: "a <b> & c".into(),
            x: Axis::linear("frame size (bytes)"),
            y: Axis::linear("Mpps"),
            lines: vec![
                Line::new(
                    "x<&>y",
                    PALETTE[0],
                    vec![(64.0, 1.0), (128.0, 0.9)],
                    Marker::Circle,
                ),
                Line::new(
                    "two",
                    PALETTE[1],
                    vec![(64.0, 2.0), (1518.0, 0.5)],
                    Marker::Square,
                ),
            ],
        };
        let s = line_chart(&c);
        let doc = parse_ok(&s);
        let series: Vec<_> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("series"))
            .collect();
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].attribute("data-series"), Some("x<&>y"));
        assert!(s.contains("x&lt;&amp;&gt;y"));
        assert!(!s.contains("x<&>y"));
        let texts: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .collect();
        assert!(texts.contains(&"a <b> & c"), "{texts:?}");
        assert!(texts.contains(&"x<&>y"));
    }

    #[test]
    fn empty_and_nan_series_make_no_nan() {
        let c = Chart {
            id: "e".into(),
            title: "empty".into(),
            x: Axis::log("ns"),
            y: Axis::linear("fraction"),
            lines: vec![
                Line::new("empty", PALETTE[0], vec![], Marker::Circle),
                Line::new(
                    "bad",
                    PALETTE[1],
                    vec![
                        (f64::NAN, 1.0),
                        (0.0, 1.0),
                        (-5.0, 2.0),
                        (1.0, f64::INFINITY),
                    ],
                    Marker::Circle,
                ),
            ],
        };
        let s = line_chart(&c);
        parse_ok(&s);
        assert!(!s.contains("NaN") && !s.contains("inf"), "{s}");
        assert!(s.contains("no data"));
        assert!(!s.contains("class=\"series\""));
        let h = histogram_chart("h", "h", Axis::linear("ns"), &[]);
        parse_ok(&h);
        assert!(!h.contains("NaN"));
    }

    #[test]
    fn single_point_and_constant_data() {
        let c = Chart {
            id: "s".into(),
            title: "one".into(),
            x: Axis::linear("x").no_zero(),
            y: Axis::log("y"),
            lines: vec![Line::new(
                "p",
                PALETTE[0],
                vec![(5.0, 5.0)],
                Marker::Diamond,
            )],
        };
        let s = line_chart(&c);
        parse_ok(&s);
        assert!(!s.contains("NaN"));
        assert!(s.contains("class=\"series\""));
    }

    #[test]
    fn ticks_are_nice() {
        let r = resolve(&Axis::linear("x"), &[0.3, 14.2], 5.0);
        let labels: Vec<_> = r.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["0", "5", "10", "15"]);
        let r = resolve(&Axis::log("x"), &[1500.0, 230_000.0], 5.0);
        let labels: Vec<_> = r.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(labels, ["1k", "10k", "100k", "1M"]);
        let r = resolve(&Axis::linear("x"), &[0.0, 0.45], 5.0);
        assert_eq!(r.ticks[1].1, "0.1");
    }

    #[test]
    fn steps_cover_buckets() {
        let p = step_points(&[(20.0, 5.0), (10.0, 5.0)], true, false);
        assert_eq!(
            p,
            vec![
                (10.0, 0.0),
                (10.0, 50.0),
                (20.0, 50.0),
                (20.0, 50.0),
                (30.0, 50.0),
                (30.0, 0.0)
            ]
        );
        assert!(step_points(&[(f64::NAN, 1.0)], true, false).is_empty());
    }
}
