//! Prometheus metrics: every engine's once-a-second report rendered in the
//! text exposition format (version 0.0.4, what `promtool check metrics`
//! and every Prometheus server read), and a small HTTP server
//! ([`serve::Server`]) that hands the last rendering to scrapers.
//!
//! Names follow Prometheus' conventions: a `linerate_` prefix, base units
//! (bytes, seconds), `_total` on counters, one family per quantity with the
//! variants in labels (`port`, `direction`, `stage`, `reason`, `worker`).
//!
//! Why our own writer rather than the `prometheus` or `prometheus-client`
//! crates: both keep a registry of live metric objects that the code
//! updates as it goes (or a collector per scrape); linerate's counters are
//! already live (one-writer atomics the data path bumps per batch) and its
//! reports already copy them once a second. The exposition format is a few
//! lines per family; writing it from the report keeps the per-packet path
//! out of it entirely and keeps one source of truth for the text, JSON and
//! metrics views of a run. `prometheus-client` also emits OpenMetrics
//! (`# EOF`, `_total` on the samples only), which `promtool check metrics`
//! of Debian 12 does not read as counters.

pub mod serve;

use std::collections::BTreeMap;
use std::fmt::Write;

/// What a family is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

struct Family {
    help: &'static str,
    kind: Kind,
    /// Sample lines, each ending in '\n'.
    samples: String,
}

/// A scrape's worth of metrics, built once per report (not per packet):
/// families in name order, each with its HELP and TYPE once.
#[derive(Default)]
pub struct Exposition {
    families: BTreeMap<String, Family>,
}

/// Label pairs of one sample.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

/// A label value as the format wants it: backslash, double quote and
/// newline escaped.
fn escape_value(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Whether `n` is a valid metric or label name (`[a-zA-Z_:][a-zA-Z0-9_:]*`,
/// no colon in label names).
fn valid_name(n: &str, colon: bool) -> bool {
    let ok = |c: char, first: bool| {
        c.is_ascii_alphabetic() || c == '_' || (colon && c == ':') || (!first && c.is_ascii_digit())
    };
    let mut cs = n.chars();
    cs.next().is_some_and(|c| ok(c, true)) && cs.all(|c| ok(c, false))
}

/// A float as the format writes it (`+Inf`, `-Inf`, `NaN`).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    fn sample(
        &mut self,
        name: &str,
        family: &str,
        help: &'static str,
        kind: Kind,
        labels: Labels<'_>,
        value: &str,
    ) {
        // Names are linerate's own constants: a bad one is a bug, caught by
        // the tests that run promtool over every command's output.
        debug_assert!(valid_name(name, true), "metric name {name}");
        let f = self
            .families
            .entry(family.to_string())
            .or_insert_with(|| Family {
                help,
                kind,
                samples: String::new(),
            });
        debug_assert_eq!(f.kind, kind, "{family} registered twice with two types");
        f.samples.push_str(name);
        if !labels.is_empty() {
            f.samples.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                debug_assert!(valid_name(k, false), "label name {k}");
                if i > 0 {
                    f.samples.push(',');
                }
                f.samples.push_str(k);
                f.samples.push_str("=\"");
                escape_value(v, &mut f.samples);
                f.samples.push('"');
            }
            f.samples.push('}');
        }
        f.samples.push(' ');
        f.samples.push_str(value);
        f.samples.push('\n');
    }

    /// A counter sample; `name` ends in `_total`.
    pub fn counter(&mut self, name: &str, help: &'static str, labels: Labels<'_>, v: u64) {
        debug_assert!(name.ends_with("_total"), "counter {name} without _total");
        self.sample(name, name, help, Kind::Counter, labels, &v.to_string());
    }

    /// A gauge sample.
    pub fn gauge(&mut self, name: &str, help: &'static str, labels: Labels<'_>, v: f64) {
        self.sample(name, name, help, Kind::Gauge, labels, &number(v));
    }

    /// A histogram: `buckets` are (upper bound, cumulative count) in
    /// increasing order; `+Inf` is added with `count`.
    pub fn histogram(
        &mut self,
        name: &str,
        help: &'static str,
        labels: Labels<'_>,
        buckets: &[(f64, u64)],
        sum: f64,
        count: u64,
    ) {
        let bucket = format!("{name}_bucket");
        for &(le, c) in buckets
            .iter()
            .chain(std::iter::once(&(f64::INFINITY, count)))
        {
            let le = number(le);
            let mut l: Vec<(&str, &str)> = labels.to_vec();
            l.push(("le", &le));
            self.sample(&bucket, name, help, Kind::Histogram, &l, &c.to_string());
        }
        self.sample(
            &format!("{name}_sum"),
            name,
            help,
            Kind::Histogram,
            labels,
            &number(sum),
        );
        self.sample(
            &format!("{name}_count"),
            name,
            help,
            Kind::Histogram,
            labels,
            &count.to_string(),
        );
    }

    /// A stage's counters (any pipeline's [`linerate_io::Snapshot`]):
    /// received and passed packets and bytes, and drops by every reason
    /// (zeros too, so that a rate over them is defined from the start).
    pub fn stage<R: linerate_io::Reason>(
        &mut self,
        labels: Labels<'_>,
        s: &linerate_io::Snapshot<R>,
    ) {
        let drops: Vec<(&str, u64)> = R::ALL.iter().map(|&r| (r.name(), s.drop_of(r))).collect();
        self.stage_counts(
            labels,
            (s.received, s.received_bytes),
            (s.passed, Some(s.passed_bytes)),
            &drops,
        );
    }

    /// A stage's counters from plain numbers (an in-kernel stage's, read
    /// from its maps): (packets, bytes) received, (packets, bytes if
    /// counted) passed, and drops by reason.
    pub fn stage_counts(
        &mut self,
        labels: Labels<'_>,
        received: (u64, u64),
        passed: (u64, Option<u64>),
        drops: &[(&str, u64)],
    ) {
        self.counter(
            "linerate_stage_received_packets_total",
            "Packets a stage received.",
            labels,
            received.0,
        );
        self.counter(
            "linerate_stage_received_bytes_total",
            "Bytes a stage received.",
            labels,
            received.1,
        );
        self.counter(
            "linerate_stage_passed_packets_total",
            "Packets a stage passed on (forwarded, captured).",
            labels,
            passed.0,
        );
        if let Some(b) = passed.1 {
            self.counter(
                "linerate_stage_passed_bytes_total",
                "Bytes a stage passed on.",
                labels,
                b,
            );
        }
        for &(reason, v) in drops {
            let mut l = labels.to_vec();
            l.push(("reason", reason));
            self.counter(
                "linerate_stage_dropped_packets_total",
                "Packets a stage dropped, by reason: received = passed + dropped.",
                &l,
                v,
            );
        }
    }

    /// Packets (and bytes, where counted) through a port in one direction
    /// (`rx` or `tx`).
    pub fn port(&mut self, port: &str, direction: &str, packets: u64, bytes: Option<u64>) {
        let l = [("port", port), ("direction", direction)];
        self.counter(
            "linerate_port_packets_total",
            "Packets through a port, by direction (rx, tx).",
            &l,
            packets,
        );
        if let Some(b) = bytes {
            self.counter(
                "linerate_port_bytes_total",
                "Bytes through a port, by direction (rx, tx).",
                &l,
                b,
            );
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut o = String::new();
        for (name, f) in &self.families {
            let _ = writeln!(o, "# HELP {name} {}", f.help);
            let _ = writeln!(o, "# TYPE {name} {}", f.kind.name());
            o.push_str(&f.samples);
        }
        o
    }
}

/// A report that has a metrics view (every engine's once-a-second tick):
/// the same numbers as its text and JSON, cumulative since the start.
pub trait Publish {
    fn metrics(&self, m: &mut Exposition);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_grouped_with_one_help_and_type_and_values_escaped() {
        let mut m = Exposition::new();
        m.counter("linerate_b_total", "B.", &[("port", "a\"b\\c\nd")], 3);
        m.gauge("linerate_a", "A.", &[], f64::NAN);
        m.counter("linerate_b_total", "B.", &[("port", "x")], 4);
        let t = m.render();
        assert_eq!(
            t,
            "# HELP linerate_a A.\n# TYPE linerate_a gauge\nlinerate_a NaN\n\
             # HELP linerate_b_total B.\n# TYPE linerate_b_total counter\n\
             linerate_b_total{port=\"a\\\"b\\\\c\\nd\"} 3\nlinerate_b_total{port=\"x\"} 4\n"
        );
    }

    #[test]
    fn a_histogram_has_cumulative_buckets_inf_sum_and_count() {
        let mut m = Exposition::new();
        m.histogram(
            "linerate_latency_seconds",
            "L.",
            &[("stream", "s")],
            &[(1e-6, 2), (1e-3, 5)],
            0.5,
            7,
        );
        let t = m.render();
        assert!(t.contains("# TYPE linerate_latency_seconds histogram\n"));
        assert!(t.contains("linerate_latency_seconds_bucket{stream=\"s\",le=\"0.000001\"} 2\n"));
        assert!(t.contains("linerate_latency_seconds_bucket{stream=\"s\",le=\"+Inf\"} 7\n"));
        assert!(t.contains("linerate_latency_seconds_sum{stream=\"s\"} 0.5\n"));
        assert!(t.contains("linerate_latency_seconds_count{stream=\"s\"} 7\n"));
        assert_eq!(t.matches("# TYPE").count(), 1);
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("linerate_x:y_total", true));
        assert!(!valid_name("linerate_x:y", false));
        assert!(!valid_name("1x", true));
        assert!(!valid_name("", true));
        assert!(!valid_name("a-b", true));
    }
}
