//! `linerate gen --xdp`: one stream sent by the in-kernel generator
//! (BPF_PROG_RUN live frames, `linerate_io::xdp::generator`), its template being
//! the first frame the software generator would send. Its run logic:
//! [`send`] (unpaced, and paced in time slices) and [`lanes`] (paced in
//! the program).

pub mod lanes;
pub mod send;

pub use send::{send, send_for};

use super::{Generator, PaceMode, Profile, RateSpec, StreamSpec};
use linerate_io::xdp::generator::{GenConfig, GenStats, SigConfig, XdpGen};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Send the profile's one stream out of `ifname` with `flows` source ports;
/// `started` gets one line saying what runs.
pub fn run(
    profile: &Profile,
    ifname: &str,
    flows: u32,
    stop: &Arc<AtomicBool>,
    started: &mut dyn FnMut(&str),
) -> Result<GenStats, String> {
    if profile.streams.len() != 1 {
        return Err(format!(
            "--xdp sends one stream; the profile has {}",
            profile.streams.len()
        ));
    }
    let spec = &profile.streams[0];
    if spec.rate.bps.is_some() || spec.rate.mode != PaceMode::Cbr {
        return Err("--xdp: rates in packets/s with --pace cbr only".into());
    }
    // The template: the first packet the generator would send.
    let mut one = Profile::single(StreamSpec {
        fields: vec![],
        rate: RateSpec::default(),
        ..spec.clone()
    });
    one.count = Some(1);
    let mut g = Generator::new(&one).map_err(|e| e.to_string())?;
    g.next_batch(0, 1);
    let frame = g
        .batch()
        .pkts()
        .first()
        .map(|p| p.bytes().to_vec())
        .ok_or("no template frame")?;
    let layers = linerate_wire::frame::parse_frame(&frame).map_err(|e| format!("template: {e}"))?;
    let cfg = GenConfig {
        flows: flows.max(1),
        signature: spec.signature.enabled.then_some(SigConfig {
            offset: layers.payload_offset as usize,
            stream: spec.id,
            sample_every: spec.signature.sample_every.max(1),
        }),
        pps: spec.rate.pps,
        ..GenConfig::default()
    };
    let mut x = XdpGen::new(ifname, &frame, cfg).map_err(|e| e.to_string())?;
    started(&format!(
        "gen --xdp: {}-byte frames out of {ifname} (BPF_PROG_RUN live frames, XDP_TX), {}",
        frame.len(),
        spec.rate
            .pps
            .map_or_else(|| "top speed".into(), |p| format!("{p:.0} pps"))
    ));
    let count = spec.rate.count.or(profile.count);
    let st = match (count, profile.duration_s) {
        (Some(n), _) => send(&mut x, n, stop),
        (None, Some(d)) => send_for(&mut x, Duration::from_secs_f64(d), stop),
        (None, None) => send_for(&mut x, Duration::from_secs(u64::MAX / 4), stop),
    };
    st.map_err(|e| e.to_string())
}
