//! The HTML report rendered by a real browser: write a report with made-up
//! but realistic data, screenshot it with headless Chromium and check that
//! every DuT's color shows up in the plots.
//!
//! Needs Debian's `chromium` package (or `CHROMIUM=/path/to/binary`); the
//! test fails, not skips, when it is missing.

use linerate_measure::report::svg::PALETTE;
use linerate_measure::report::{
    line_rate_mpps, render_html, LatencySeries, ReportData, Series, Table,
};
use std::path::PathBuf;

const DUTS: [&str; 3] = [
    "linerate fwd (AF_XDP)",
    "Linux bridge",
    "OvS <userspace> & \"dpdk\"",
];
const SIZES: [f64; 7] = [64.0, 128.0, 256.0, 512.0, 1024.0, 1280.0, 1518.0];

fn sample_data() -> ReportData {
    let g = 10.0;
    // CPU-bound DuTs: a fixed packet rate until the link is the limit.
    let caps = [12.5, 1.9, 4.2];
    let throughput = DUTS
        .iter()
        .zip(caps)
        .map(|(d, cap)| Series {
            dut: d.to_string(),
            points: SIZES
                .iter()
                .map(|&s| (s, f64::min(cap * (1.0 - s / 20000.0), line_rate_mpps(g, s))))
                .collect(),
            ..Default::default()
        })
        .collect();
    let latency = DUTS
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let base: f64 = [2_500.0, 18_000.0, 7_000.0][i];
            // Log-normal-ish: buckets 1.2x apart, counts a bell in log space.
            let mut histogram = Vec::new();
            let mut cdf = Vec::new();
            let mut x = base * 0.5;
            let mut total = 0u64;
            let mut raw = Vec::new();
            while x < base * 20.0 {
                let z = (x / base).ln() / 0.45;
                let c = (10_000.0 * (-z * z / 2.0).exp()) as u64 + u64::from(x > base * 4.0) * 3;
                raw.push((x, c));
                total += c;
                x *= 1.2;
            }
            let mut acc = 0u64;
            for &(x, c) in &raw {
                histogram.push((x, c));
                acc += c;
                cdf.push((x * 1.2, acc as f64 / total as f64));
            }
            LatencySeries {
                dut: d.to_string(),
                frame_size: 64,
                cdf,
                histogram,
                samples: Some(total),
                min_ns: Some(base * 0.5),
                mean_ns: Some(base * 1.1),
                p50_ns: Some(base),
                p90_ns: Some(base * 1.8),
                p99_ns: Some(base * 3.1),
                p999_ns: Some(base * 6.0),
                max_ns: Some(base * 19.0),
            }
        })
        .collect();
    let frame_loss = DUTS
        .iter()
        .zip(caps)
        .map(|(d, cap)| Series {
            dut: d.to_string(),
            points: (1..=10)
                .map(|k| {
                    let offered = k as f64 * 10.0;
                    let offered_mpps = line_rate_mpps(g, 64.0) * offered / 100.0;
                    let loss = (1.0 - cap / offered_mpps).max(0.0) * 100.0;
                    (offered, loss)
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    ReportData {
        title: "linerate bench: L2 forwarding <veth> & friends".into(),
        frame_loss_load: String::new(),
        date: "2026-11-22T04:20:00Z".into(),
        environment: vec![
            ("kernel".into(), "Linux 6.18.0 x86_64".into()),
            ("CPU".into(), "2 cores, TSC 2.5 GHz".into()),
            ("XDP mode".into(), "native (veth)".into()),
            ("linerate".into(), "0.1.0".into()),
        ],
        throughput,
        line_rate_gbps: g,
        latency,
        frame_loss,
        tables: vec![Table {
            title: "Trials".into(),
            header: vec!["DuT".into(), "frame size".into(), "Mpps".into()],
            rows: DUTS
                .iter()
                .map(|d| vec![d.to_string(), "64".into(), "1.23".into()])
                .collect(),
        }],
    }
}

use linerate_testkit::chromium::{hex, screenshot, Shot};

#[test]
fn report_renders_in_chromium_with_every_series_visible() {
    let data = sample_data();
    let html = render_html(&data);
    // Self-contained: no scripts, no external resources.
    assert!(!html.contains("<script"));
    assert!(
        !html.contains("http://")
            || !html
                .replace("http://www.w3.org/2000/svg", "")
                .contains("http://")
    );
    assert!(!html.contains("https://"));
    assert!(!html.contains("NaN"));
    assert!(html.contains("OvS &lt;userspace&gt; &amp; &quot;dpdk&quot;"));
    assert_eq!(html.matches("<figure>").count(), 5);
    assert_eq!(html.matches("<figcaption>").count(), 5);

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    let shot = dir.join("report.png");
    std::fs::write(&page, &html).unwrap();
    // Also keep the JSON form: the data model must round-trip.
    let json = serde_json::to_string(&data).unwrap();
    // (floats compared approximately: serde_json's default float parsing
    // may differ in the last bit)
    let back: ReportData = serde_json::from_str(&json).unwrap();
    assert_eq!(back.environment, data.environment);
    assert_eq!(back.tables, data.tables);
    assert_eq!(back.latency.len(), data.latency.len());
    for (a, b) in back.throughput.iter().zip(&data.throughput) {
        assert_eq!(a.dut, b.dut);
        for (p, q) in a.points.iter().zip(&b.points) {
            assert!((p.1 - q.1).abs() < 1e-9 && p.0 == q.0);
        }
    }

    screenshot(&page, &shot, &dir.join("profile"), 3600);
    eprintln!("screenshot: {}", shot.display());

    let png = Shot::load(&shot);
    let count = |c: [u8; 3]| png.count(c);
    let white = count([255, 255, 255]);
    let total = (png.width * png.height) as usize;
    assert!(white < total, "screenshot is blank");
    for (i, dut) in DUTS.iter().enumerate() {
        // 5 plots, several hundred pixels of line and markers each; the
        // legend swatches alone are about 100 pixels per plot.
        let n = count(hex(PALETTE[i]));
        assert!(
            n > 3000,
            "DuT {dut:?} (color {}) shows in only {n} pixels",
            PALETTE[i]
        );
    }
    // Colors no series uses must not be there: the counter is discriminating.
    let unused = count(hex(PALETTE[7]));
    assert!(unused < 200, "unused palette color in {unused} pixels");
    let _ = std::fs::remove_dir_all(dir.join("profile"));
}
