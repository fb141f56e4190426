//! Benchmark report: plain data in ([`ReportData`], serde), one
//! self-contained HTML page out ([`render_html`]): inline CSS, inline SVG
//! plots, no scripts and no external resources.
//!
//! Plots (each in a `<figure>` with a `<figcaption>`): throughput in Mpps
//! and in Gbit/s (L1) against frame size with the theoretical line rate as
//! a dashed curve, per frame size a latency CDF (log x) and a latency
//! histogram, and frame loss against offered load. A DuT keeps the same
//! color in every plot.
//!
//! Frame sizes are Ethernet frame sizes on the wire including the FCS
//! (64..1518 as in RFC 2544); the line rate adds 20 bytes of preamble,
//! start delimiter and inter-frame gap per frame.

pub mod svg;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use svg::{escape, Axis, Chart, Hist, Line, Marker, PALETTE, REFERENCE_COLOR};

/// Everything a report shows.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ReportData {
    pub title: String,
    /// Free text, e.g. an RFC 3339 time stamp.
    pub date: String,
    /// (name, value): kernel, CPU, DuT versions, XDP mode, ...
    #[serde(default)]
    pub environment: Vec<(String, String)>,
    /// Points are (frame size in bytes, Mpps).
    #[serde(default)]
    pub throughput: Vec<Series>,
    /// Link speed for the theoretical line-rate curve; 0 (or not finite) draws none.
    #[serde(default)]
    pub line_rate_gbps: f64,
    #[serde(default)]
    pub latency: Vec<LatencySeries>,
    /// Points are (offered load in percent of line rate, frame loss in percent).
    #[serde(default)]
    pub frame_loss: Vec<Series>,
    /// What 100 % offered load is in the frame loss plot (empty: "line rate").
    #[serde(default)]
    pub frame_loss_load: String,
    /// Raw trials and anything else, shown as tables at the end.
    #[serde(default)]
    pub tables: Vec<Table>,
}

/// One DuT's points.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Series {
    pub dut: String,
    pub points: Vec<(f64, f64)>,
    /// The x of points that are lower bounds (the generator, not the DuT,
    /// was the limit): the legend says ">=" at them, as the tables do.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lower_bounds: Vec<f64>,
}

impl Series {
    /// The legend's name: the DuT, and the sizes where its points are
    /// lower bounds ("linerate-xdp (>= at 64, 512 B)"). The color stays
    /// the DuT's ([`Style`] keys it by `dut`).
    fn legend(&self) -> String {
        if self.lower_bounds.is_empty() {
            return self.dut.clone();
        }
        let at: Vec<String> = self.lower_bounds.iter().map(|x| fmt_num(*x)).collect();
        format!("{} (>= at {} B)", self.dut, at.join(", "))
    }
}

/// Latency of one DuT at one frame size.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySeries {
    pub dut: String,
    pub frame_size: u32,
    /// (latency in ns, fraction of samples <= it, 0..1), ascending.
    #[serde(default)]
    pub cdf: Vec<(f64, f64)>,
    /// (bucket lower bound in ns, sample count).
    #[serde(default)]
    pub histogram: Vec<(f64, u64)>,
    #[serde(default)]
    pub samples: Option<u64>,
    #[serde(default)]
    pub min_ns: Option<f64>,
    #[serde(default)]
    pub mean_ns: Option<f64>,
    #[serde(default)]
    pub p50_ns: Option<f64>,
    #[serde(default)]
    pub p90_ns: Option<f64>,
    #[serde(default)]
    pub p99_ns: Option<f64>,
    #[serde(default)]
    pub p999_ns: Option<f64>,
    #[serde(default)]
    pub max_ns: Option<f64>,
}

/// A table of text cells.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Theoretical maximum frame rate in Mpps of a `gbps` link for frames of
/// `frame_size` bytes (with FCS): G / ((size + 20) * 8).
pub fn line_rate_mpps(gbps: f64, frame_size: f64) -> f64 {
    gbps * 1e3 / ((frame_size + 20.0) * 8.0)
}

/// Layer-1 throughput in Gbit/s of `mpps` frames of `frame_size` bytes.
pub fn l1_gbps(mpps: f64, frame_size: f64) -> f64 {
    mpps * (frame_size + 20.0) * 8.0 / 1e3
}

/// Colors by DuT, in order of first appearance in the data.
fn dut_colors(d: &ReportData) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    let names = d
        .throughput
        .iter()
        .map(|s| &s.dut)
        .chain(d.latency.iter().map(|s| &s.dut))
        .chain(d.frame_loss.iter().map(|s| &s.dut));
    for name in names {
        let next = m.len();
        m.entry(name.clone()).or_insert(next);
    }
    m
}

struct Style {
    colors: BTreeMap<String, usize>,
}

impl Style {
    fn idx(&self, dut: &str) -> usize {
        self.colors.get(dut).copied().unwrap_or(0)
    }
    fn color(&self, dut: &str) -> &'static str {
        PALETTE[self.idx(dut) % PALETTE.len()]
    }
    fn marker(&self, dut: &str) -> Marker {
        Marker::nth(self.idx(dut))
    }
    fn line(&self, dut: &str, points: Vec<(f64, f64)>) -> Line {
        Line::new(dut, self.color(dut), points, self.marker(dut))
    }
}

fn sorted(mut p: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    p
}

/// The throughput charts (Mpps, Gbit/s), or none without throughput data.
fn throughput_charts(d: &ReportData, st: &Style) -> Vec<(Chart, String)> {
    if d.throughput.is_empty() {
        return Vec::new();
    }
    let sizes: Vec<f64> = d
        .throughput
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .filter(|x| x.is_finite() && *x > -20.0)
        .collect();
    let (lo, hi) = sizes
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let data_max = d
        .throughput
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0f64, f64::max);
    let g = d.line_rate_gbps;
    let has_ref = g.is_finite() && g > 0.0 && lo.is_finite();
    let named = |s: &Series, points| {
        let mut l = st.line(&s.dut, points);
        l.name = s.legend();
        l
    };
    let mut mpps: Vec<Line> = d
        .throughput
        .iter()
        .map(|s| named(s, sorted(s.points.clone())))
        .collect();
    let mut gbps: Vec<Line> = d
        .throughput
        .iter()
        .map(|s| {
            let p = s.points.iter().map(|&(x, y)| (x, l1_gbps(y, x))).collect();
            named(s, sorted(p))
        })
        .collect();
    let name = format!("line rate {} Gbit/s", fmt_num(g));
    if has_ref {
        let steps = 100;
        let pts: Vec<(f64, f64)> = (0..=steps)
            .map(|i| {
                let x = lo + (hi - lo) * i as f64 / steps as f64;
                (x, line_rate_mpps(g, x))
            })
            .collect();
        let ref_max = pts.iter().map(|p| p.1).fold(0.0f64, f64::max);
        // The line rate can be far above what veth DuTs reach: then it is
        // clipped instead of squashing the data to the bottom of the plot.
        let fits = data_max <= 0.0 || ref_max <= 4.0 * data_max;
        let mk = |pts: Vec<(f64, f64)>, fits: bool| Line {
            name: name.clone(),
            color: REFERENCE_COLOR.to_string(),
            points: pts,
            dashed: true,
            marker: Marker::None,
            fill: false,
            affects_range: fits,
        };
        mpps.push(mk(pts, fits));
        let gmax = d
            .throughput
            .iter()
            .flat_map(|s| s.points.iter().map(|&(x, y)| l1_gbps(y, x)))
            .filter(|y| y.is_finite())
            .fold(0.0f64, f64::max);
        gbps.push(mk(vec![(lo, g), (hi, g)], gmax <= 0.0 || g <= 4.0 * gmax));
    }
    let x = Axis::linear("frame size (bytes)");
    let bounds = if d.throughput.iter().any(|s| !s.lower_bounds.is_empty()) {
        " \">= at\": lower bounds at those sizes (the generator, not the DuT, was the limit)."
    } else {
        ""
    };
    vec![
        (
            Chart {
                id: "thr-mpps".into(),
                title: "Throughput (Mpps)".into(),
                x: x.clone(),
                y: Axis::linear("throughput (Mpps)"),
                lines: mpps,
            },
            if has_ref {
                format!("Throughput in million frames per second against frame size; dashed: the theoretical line rate of a {} Gbit/s link.{bounds}", fmt_num(g))
            } else {
                format!("Throughput in million frames per second against frame size.{bounds}")
            },
        ),
        (
            Chart {
                id: "thr-gbps".into(),
                title: "Throughput (Gbit/s, layer 1)".into(),
                x,
                y: Axis::linear("throughput (Gbit/s, L1)"),
                lines: gbps,
            },
            format!("The same throughput in Gbit/s on the wire (layer 1: frame + 20 bytes of preamble, start delimiter and inter-frame gap).{bounds}"),
        ),
    ]
}

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    if v == v.round() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn fmt_ns(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            if v >= 1e6 {
                format!("{:.2} ms", v / 1e6)
            } else if v >= 1e3 {
                format!("{:.2} µs", v / 1e3)
            } else {
                format!("{v:.0} ns")
            }
        }
        _ => "-".to_string(),
    }
}

pub fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure>{svg}<figcaption>{}</figcaption></figure>",
        escape(caption)
    );
}

pub fn table_html(out: &mut String, t: &Table) {
    let _ = write!(out, "<table>");
    if !t.title.is_empty() {
        let _ = write!(out, "<caption>{}</caption>", escape(&t.title));
    }
    if !t.header.is_empty() {
        out.push_str("<thead><tr>");
        for h in &t.header {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr></thead>");
    }
    out.push_str("<tbody>");
    for r in &t.rows {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{}</td>", escape(&c.replace("**", "")));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
}

pub const CSS: &str = "body{font-family:sans-serif;color:#222;max-width:960px;margin:1.5em auto;padding:0 1em;line-height:1.4}\
h1{font-size:1.7em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}\
.date{color:#666;margin-top:0}figure{margin:1em 0}figure svg{display:block;width:100%;max-width:720px;height:auto;border:1px solid #ddd}\
figcaption{font-size:.9em;color:#444;max-width:720px;margin-top:.3em}\
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}caption{text-align:left;font-weight:bold;padding:.3em 0}\
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#f2f2f2}tbody tr:nth-child(even){background:#fafafa}\
td.num{text-align:right}p.none{color:#777}";

/// Render the whole report as one self-contained HTML document.
pub fn render_html(d: &ReportData) -> String {
    let st = Style {
        colors: dut_colors(d),
    };
    let mut o = String::new();
    let title = if d.title.is_empty() {
        "linerate report"
    } else {
        &d.title
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{CSS}</style></head><body>\n<h1>{t}</h1>\n",
        t = escape(title)
    );
    if !d.date.is_empty() {
        let _ = writeln!(o, "<p class=\"date\">{}</p>", escape(&d.date));
    }

    o.push_str("<h2>Environment</h2>\n");
    if d.environment.is_empty() {
        o.push_str("<p class=\"none\">Not recorded.</p>\n");
    } else {
        o.push_str("<table class=\"env\"><tbody>");
        for (k, v) in &d.environment {
            let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
        }
        o.push_str("</tbody></table>\n");
    }

    o.push_str("<h2>Throughput</h2>\n");
    let thr = throughput_charts(d, &st);
    if thr.is_empty() {
        o.push_str("<p class=\"none\">No throughput measured.</p>\n");
    }
    for (c, cap) in &thr {
        figure(&mut o, &svg::line_chart(c), cap);
    }

    o.push_str("<h2>Latency</h2>\n");
    if d.latency.is_empty() {
        o.push_str("<p class=\"none\">No latency measured.</p>\n");
    }
    let mut sizes: Vec<u32> = d.latency.iter().map(|l| l.frame_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for size in &sizes {
        let here: Vec<&LatencySeries> =
            d.latency.iter().filter(|l| l.frame_size == *size).collect();
        let name = if *size == crate::frame_size::IMIX {
            "IMIX frames (64, 570, 1518 bytes, 7:4:1)".to_string()
        } else {
            format!("{size}-byte frames")
        };
        let _ = writeln!(o, "<h3>{name}</h3>");
        let cdf = Chart {
            id: format!("lat-cdf-{size}"),
            title: format!("Latency CDF, {name}"),
            x: Axis::log("latency (ns)"),
            y: Axis::linear("fraction of samples").range(0.0, 1.0),
            lines: here
                .iter()
                .map(|l| {
                    let mut line = st.line(&l.dut, sorted(l.cdf.clone()));
                    line.marker = Marker::None;
                    line
                })
                .collect(),
        };
        figure(
            &mut o,
            &svg::line_chart(&cdf),
            &format!("Cumulative distribution of the latency of {name} (log scale)."),
        );
        let hists: Vec<Hist> = here
            .iter()
            .map(|l| Hist {
                name: l.dut.clone(),
                color: st.color(&l.dut).to_string(),
                buckets: l.histogram.iter().map(|&(x, c)| (x, c as f64)).collect(),
            })
            .collect();
        // Log x when the buckets span two decades or more (long tails).
        let lows: Vec<f64> = here
            .iter()
            .flat_map(|l| l.histogram.iter().filter(|b| b.1 > 0).map(|b| b.0))
            .filter(|x| x.is_finite())
            .collect();
        let mn = lows.iter().copied().fold(f64::INFINITY, f64::min);
        let mx = lows.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let x = if mn > 0.0 && mx / mn >= 100.0 {
            Axis::log("latency (ns)")
        } else {
            Axis::linear("latency (ns)").no_zero()
        };
        figure(
            &mut o,
            &svg::histogram_chart(
                &format!("lat-hist-{size}"),
                &format!("Latency histogram, {name}"),
                x,
                &hists,
            ),
            &format!("Histogram of the latency of {name}, in percent of each DuT's samples."),
        );
        let mut t = Table {
            title: format!("Latency percentiles, {name}"),
            header: [
                "DuT", "samples", "min", "mean", "p50", "p90", "p99", "p99.9", "max",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            rows: Vec::new(),
        };
        for l in &here {
            let samples = l
                .samples
                .unwrap_or_else(|| l.histogram.iter().map(|b| b.1).sum());
            t.rows.push(vec![
                l.dut.clone(),
                samples.to_string(),
                fmt_ns(l.min_ns),
                fmt_ns(l.mean_ns),
                fmt_ns(l.p50_ns),
                fmt_ns(l.p90_ns),
                fmt_ns(l.p99_ns),
                fmt_ns(l.p999_ns),
                fmt_ns(l.max_ns),
            ]);
        }
        table_html(&mut o, &t);
    }

    o.push_str("<h2>Frame loss</h2>\n");
    if d.frame_loss.is_empty() {
        o.push_str("<p class=\"none\">No frame loss measured.</p>\n");
    } else {
        let c = Chart {
            id: "loss".into(),
            title: "Frame loss rate".into(),
            x: Axis::linear(&format!(
                "offered load (% of {})",
                if d.frame_loss_load.is_empty() {
                    "line rate"
                } else {
                    &d.frame_loss_load
                }
            )),
            y: Axis::linear("frame loss (%)"),
            lines: d
                .frame_loss
                .iter()
                .map(|s| st.line(&s.dut, sorted(s.points.clone())))
                .collect(),
        };
        figure(
            &mut o,
            &svg::line_chart(&c),
            "Frame loss in percent of the offered frames against the offered load (RFC 2544 frame loss rate).",
        );
    }

    if !d.tables.is_empty() {
        o.push_str("<h2>Tables</h2>\n");
        for t in &d.tables {
            table_html(&mut o, t);
        }
    }
    o.push_str("<footer><p class=\"date\">Generated by linerate.</p></footer>\n</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svgs(html: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let mut rest = html;
        while let Some(a) = rest.find("<svg") {
            let b = rest[a..].find("</svg>").expect("closed svg") + a + 6;
            out.push(&rest[a..b]);
            rest = &rest[b..];
        }
        out
    }

    fn data() -> ReportData {
        ReportData {
            title: "t <&>".into(),
            frame_loss_load: String::new(),
            date: "now".into(),
            environment: vec![("kernel".into(), "6.18 <x>".into())],
            throughput: vec![
                Series {
                    dut: "a<b>&c".into(),
                    points: vec![(1518.0, 0.8), (64.0, 3.0), (512.0, f64::NAN)],
                    ..Default::default()
                },
                Series {
                    dut: "empty".into(),
                    ..Default::default()
                },
            ],
            line_rate_gbps: 100.0,
            latency: vec![LatencySeries {
                dut: "a<b>&c".into(),
                frame_size: 64,
                cdf: vec![(1000.0, 0.5), (2000.0, 1.0)],
                histogram: vec![(900.0, 5), (1000.0, 10), (1500.0, 5)],
                p50_ns: Some(1000.0),
                ..Default::default()
            }],
            frame_loss: vec![Series {
                dut: "empty".into(),
                points: vec![(10.0, 0.0), (100.0, 20.0)],
                ..Default::default()
            }],
            tables: vec![Table {
                title: "raw".into(),
                header: vec!["h<".into()],
                rows: vec![vec!["v&".into()]],
            }],
        }
    }

    #[test]
    fn html_figures_are_well_formed_svg_with_every_series() {
        let d = data();
        let html = render_html(&d);
        assert!(!html.contains("NaN") && !html.contains("inf\""));
        assert!(!html.contains("<script") && !html.contains("https://"));
        let svgs = svgs(&html);
        // Mpps, Gbit/s, CDF, histogram, loss.
        assert_eq!(svgs.len(), 5);
        assert_eq!(html.matches("<figcaption>").count(), 5);
        for s in &svgs {
            roxmltree::Document::parse(s).unwrap_or_else(|e| panic!("{e}: {s}"));
        }
        let doc = roxmltree::Document::parse(svgs[0]).unwrap();
        let names: Vec<_> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("series"))
            .filter_map(|n| n.attribute("data-series"))
            .collect();
        // The empty series draws no path but keeps its legend entry.
        assert_eq!(names, ["a<b>&c", "line rate 100 Gbit/s"]);
        assert!(svgs[0].contains(">empty</text>"));
        // The line rate (148 Mpps at 64 B) is far above the data: clipped,
        // the y axis stays near the data.
        assert!(!svgs[0].contains(">150<") && svgs[0].contains("stroke-dasharray"));
        // Same DuT, same color in every plot.
        assert!(svgs.iter().take(4).all(|s| s.contains(PALETTE[0])));
        assert!(svgs[4].contains(PALETTE[1]));
        assert!(html.contains("<th>kernel</th><td>6.18 &lt;x&gt;</td>"));
        assert!(html.contains("<th>h&lt;</th>") && html.contains("<td>v&amp;</td>"));
        assert!(html.contains("<td>1.00 µs</td>"));
    }

    #[test]
    fn empty_report_renders() {
        let html = render_html(&ReportData::default());
        assert!(svgs(&html).is_empty());
        assert!(html.contains("No throughput measured."));
        assert!(html.contains("<title>linerate report</title>"));
        // Throughput without a line rate and only empty series.
        let d = ReportData {
            throughput: vec![Series::default()],
            line_rate_gbps: f64::NAN,
            ..Default::default()
        };
        let html = render_html(&d);
        assert!(!html.contains("NaN"));
        assert!(html.contains("no data"));
        for s in svgs(&html) {
            roxmltree::Document::parse(s).unwrap();
        }
    }

    #[test]
    fn line_rate_formulas() {
        assert!((line_rate_mpps(10.0, 64.0) - 14.880952).abs() < 1e-5);
        assert!((l1_gbps(14.880952, 64.0) - 10.0).abs() < 1e-5);
    }
}
