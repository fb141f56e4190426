//! Headless Chromium for the HTML report tests (feature `chromium`): find
//! the browser, take a screenshot of a page, count the pixels of a color.
//!
//! Test-only conveniences: each panics when the browser is missing, fails
//! or takes longer than 60 s, or the screenshot cannot be decoded.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The browser: $CHROMIUM, or chromium, chromium-browser or google-chrome
/// in $PATH.
pub fn find_chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(p);
    }
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "headless Chromium not found: install Debian's package (apt-get install -y chromium) \
         or set CHROMIUM=/path/to/chromium; this test renders the HTML report in a real browser"
    );
}

/// A `1200 x height` screenshot of the page `html` into `png`, with a
/// browser profile in `profile`; waits up to 60 s for the browser.
pub fn screenshot(html: &Path, png: &Path, profile: &Path, height: u32) {
    let bin = find_chromium();
    let mut child = Command::new(&bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size=1200,{height}"))
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    let start = Instant::now();
    loop {
        match child.try_wait().expect("wait for chromium") {
            Some(st) => {
                let out = child.wait_with_output().expect("chromium output");
                assert!(
                    st.success() && png.is_file(),
                    "chromium failed ({st}): {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                return;
            }
            None if start.elapsed() > Duration::from_secs(60) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("chromium did not finish the screenshot within 60 s");
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// `#rrggbb` as RGB bytes.
pub fn hex(c: &str) -> [u8; 3] {
    let v = u32::from_str_radix(c.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

/// A decoded screenshot: RGB(A) pixels.
pub struct Shot {
    pub px: Vec<u8>,
    pub channels: usize,
    pub width: u32,
    pub height: u32,
}

impl Shot {
    pub fn load(png_path: &Path) -> Shot {
        let dec = png::Decoder::new(std::fs::File::open(png_path).unwrap());
        let mut reader = dec.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let channels = match info.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => panic!("unexpected PNG color type {other:?}"),
        };
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        buf.truncate(info.buffer_size());
        Shot {
            px: buf,
            channels,
            width: info.width,
            height: info.height,
        }
    }

    /// Pixels within 10 of color `c` in every channel.
    pub fn count(&self, c: [u8; 3]) -> usize {
        self.px
            .chunks_exact(self.channels)
            .filter(|p| (0..3).all(|i| p[i].abs_diff(c[i]) <= 10))
            .count()
    }
}
