//! What a real trial's record counts, on a test bed with the Linux bridge
//! as its DuT.
//!
//! Loss on the sink side is the bed's, not the DuT's: the sink falls
//! behind on purpose. s0's receive work (its NAPI, where the sink's XDP
//! program runs) is moved into a kernel thread on CPU 1; for the first
//! 0.4 s of a 200 kpps trial that thread is put in the idle scheduling
//! class and a thread of this test spins on CPU 1. The bridge keeps
//! forwarding (in the softirq of the generator's CPU 0), and what d1
//! cannot put into s0's full ring (256 frames) the veth drops and counts
//! as d1's tx_dropped. The trial must reach that (the test fails saying so
//! if it does not), be invalid, naming those drops as the bed's loss, and
//! every frame it lost must be among them. The trials before (the control)
//! and after (the repeat) at 20 kpps are held to the same rule: drops on
//! the sink side make a trial invalid, and without them nothing is lost.
//!
//! Both ways, the aggregate rates are over the span the two generators
//! share (from the first stamp of either to the last of either), never the
//! sum of each direction's rate over its own span.
//!
//! Needs root and 2 CPUs; every bed is removed also when a test fails.
//!
//! Measured on the 2-vCPU CI machine: 120 000 to 130 000 of the 200 000
//! frames dropped on the sink side in the starved trial (more than the
//! 80 000 of its 0.4 s: the thread, back at its class, did not catch up at
//! 200 kpps); 0 to 78 of 20 000 in the 20 kpps trials; 190 000 to 197 000
//! of 200 000 with the thread starved for a whole trial at the generator's
//! top speed (~0.3 Mpps), and 78 000 to 106 000 there with the thread
//! merely on a CPU of its own: a sink in a thread of its own does not keep
//! up with this bed.

use linerate_io::xdp::count::XdpCount;
use linerate_io::xdp::AttachMode;
use linerate_measure::bench::rfc2544::{Procedure, TrialRecord, TrialSpec, Trials};
use linerate_measure::bench::trial::{BedTrials, Ends, TAG_OFFSET};
use linerate_measure::testbed::{DutMode, FrameAddrs, Testbed, TestbedConfig};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_testkit::{require_cpus, require_root, require_tool};

/// 20 000 64-byte frames at 20 kpps (1 s): the sink keeps up.
fn spec() -> TrialSpec {
    TrialSpec {
        frame_size: 64,
        rate_pps: Some(20_000.0),
        frames: Some(20_000),
        duration: Duration::from_secs(1),
        latency: false,
        procedure: Procedure::Throughput,
    }
}

/// 200 000 frames at 200 kpps (1 s): s0's ring (256 frames) fills in
/// 1.3 ms whenever its NAPI thread is off its CPU. The bridge forwards
/// this without loss here (it forwarded ~0.3 Mpps at the generator's top
/// speed, every frame lost there the sink side's); a generator that falls
/// behind only makes the trial longer (and invalid for that too).
fn fast() -> TrialSpec {
    TrialSpec {
        rate_pps: Some(200_000.0),
        frames: Some(200_000),
        ..spec()
    }
}

/// Set thread `pid`'s scheduling class (SCHED_IDLE: it runs only in what
/// CPU time the other threads of its CPU leave; SCHED_OTHER: back).
fn sched(pid: u32, policy: i32) {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: a valid sched_param for a pid of this machine.
    let r = unsafe { libc::sched_setscheduler(pid as i32, policy, &p) };
    assert_eq!(
        r,
        0,
        "scheduling class {policy} for NAPI thread {pid}: {}",
        std::io::Error::last_os_error()
    );
}

/// A thread on `cpu` that puts the `napi` threads (on that CPU) into the
/// idle class and spins for `d`, so that they get next to none of it,
/// then gives them their class back: the sink drains what its ring holds
/// before the trial's counters are read.
fn starve(cpu: usize, napi: Vec<u32>, d: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread.
        let r = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        assert_eq!(
            r,
            0,
            "pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
        napi.iter().for_each(|&p| sched(p, libc::SCHED_IDLE));
        let t = Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
        napi.iter().for_each(|&p| sched(p, libc::SCHED_OTHER));
    })
}

/// One bed at a time (each pins its generator to CPU 0).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The bed: bridge DuT, verified sink on s0; with `threaded_sink` its
/// NAPI in a thread on CPU 1, with `both_ways` a second generator on s0
/// (CPU 1) and a verified sink on g0. `f` gets the trials and the pids of
/// s0's NAPI threads. Removed afterwards, also when `f` panics.
fn with_bridge(threaded_sink: bool, both_ways: bool, f: impl FnOnce(&mut BedTrials, &[u32])) {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    require_root();
    require_cpus(2);
    require_tool("ethtool");
    let mut bed = Testbed::up(&TestbedConfig {
        name: Some(format!(
            "lrtc{}x{}",
            std::process::id(),
            u8::from(threaded_sink) + 2 * u8::from(both_ways)
        )),
        gro: Some(true),
        ipv6: false,
        ..TestbedConfig::default()
    })
    .unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bed.enable_bridge().unwrap();
        let mut sink = bed
            .in_netns(bed.ns_sink(), || {
                XdpCount::attach_verified("s0", AttachMode::Native, false, TAG_OFFSET)
            })
            .unwrap()
            .unwrap();
        let mut rsink = if both_ways {
            Some(
                bed.in_netns(bed.ns_gen(), || {
                    XdpCount::attach_verified("g0", AttachMode::Native, false, TAG_OFFSET)
                })
                .unwrap()
                .unwrap(),
            )
        } else {
            None
        };
        if threaded_sink {
            bed.sink_napi_thread(1).unwrap();
        }
        let napi: Vec<u32> = bed
            .info()
            .napi_threads
            .iter()
            .filter(|t| t.ifname == "s0")
            .map(|t| t.pid)
            .collect();
        assert!(!threaded_sink || !napi.is_empty(), "no NAPI thread of s0");
        let addrs = FrameAddrs::for_mode(bed.info(), DutMode::Bridge);
        let stop = Arc::new(AtomicBool::new(false));
        let mut t = BedTrials::new(Ends::of_bed(&bed), &mut sink, addrs, 0, 64, 16, stop);
        if let Some(rs) = rsink.as_mut() {
            t = t.both_ways(
                rs,
                FrameAddrs::reverse(bed.info(), DutMode::Bridge),
                Some(1),
            );
        }
        f(&mut t, &napi);
    }));
    bed.down().unwrap();
    if let Err(e) = r {
        std::panic::resume_unwind(e);
    }
}

/// The counts of the sink side, for the messages.
fn sink_side(r: &TrialRecord) -> String {
    let k = &r.kernel;
    format!(
        "the sink side dropped {} (d1 tx_dropped {}, tx_errors {}, s0 rx_dropped {}, counted twice {}); lost {} of {} offered at {:.0} pps",
        k.sink_side_dropped,
        k.dut_out_tx_dropped,
        k.dut_out_tx_errors,
        k.sink_iface_rx_dropped,
        k.sink_side_counted_twice,
        r.lost,
        r.sent,
        r.offered_pps
    )
}

/// What every trial here must show: frames the sink side dropped make it
/// invalid, naming them as the bed's loss, and every frame lost is one
/// of them (the bridge loses none at these rates: nothing is left to
/// charge to the DuT); with none dropped there, nothing is lost.
fn check(what: &str, r: &TrialRecord) {
    let k = &r.kernel;
    let bed = r.invalid.iter().find(|w| w.contains("the bed's loss"));
    if k.sink_side_dropped > 0 && r.lost > 0 {
        let want = format!(
            "the sink side dropped {} frames (d1 tx_dropped {}",
            k.sink_side_dropped, k.dut_out_tx_dropped
        );
        assert!(
            bed.is_some_and(|w| w.starts_with(&want)
                && w.ends_with("lost in all: the bed's loss, not the DuT's")),
            "{what}: {}: {:?}",
            sink_side(r),
            r.invalid
        );
        assert!(
            r.lost <= k.sink_side_dropped,
            "{what}: frames lost that the sink side did not drop: {}: {r:#?}",
            sink_side(r)
        );
    } else {
        assert_eq!(r.lost, 0, "{what}: {}: {r:#?}", sink_side(r));
        assert!(bed.is_none(), "{what}: {:?}", r.invalid);
    }
    // The four comparisons agree whatever the sink side dropped: on veth
    // they cannot see it.
    assert!(k.agrees, "{what}: {k:#?}");
}

#[test]
fn frames_a_slow_sink_dropped_make_the_trial_invalid_and_are_not_the_duts() {
    with_bridge(true, false, |t, napi| {
        // The control (and the generator's calibration).
        let control = t.trial(&spec()).unwrap();
        eprintln!("control: {}", sink_side(&control));
        check("control", &control);

        // The sink's CPU taken for the first 0.4 s of the fast trial.
        let hog = starve(1, napi.to_vec(), Duration::from_millis(400));
        let r = t.trial(&fast()).unwrap();
        hog.join().unwrap();
        eprintln!("sink starved: {}", sink_side(&r));
        assert!(
            r.kernel.sink_side_dropped > 0 && r.lost > 0,
            "the test did not reach its condition: with its NAPI thread starved of CPU 1 for \
             0.4 s at 200 kpps the sink side dropped nothing: {}",
            sink_side(&r)
        );
        check("sink starved", &r);

        // The repeat, with the sink's CPU free again.
        let again = t.trial(&spec()).unwrap();
        eprintln!("repeat: {}", sink_side(&again));
        check("repeat", &again);
    });
}

#[test]
fn both_ways_rates_are_over_the_span_the_generators_share() {
    with_bridge(false, true, |t, _| {
        // 40 kpps both ways: 20 000 frames each way at 20 kpps.
        let spec = TrialSpec {
            rate_pps: Some(40_000.0),
            frames: Some(40_000),
            ..spec()
        };
        let r = t.trial(&spec).unwrap();
        assert_eq!(r.directions.len(), 2, "{r:#?}");
        let spans: Vec<(u64, u64)> = r
            .directions
            .iter()
            .map(|d| d.send_span_ns.expect("a direction without send stamps"))
            .collect();
        let own: f64 = r.directions.iter().map(|d| d.offered_pps).sum();
        eprintln!(
            "spans {spans:?} (common {:?}): {:.0} pps over {:.4} s both ways; the directions' own rates {:.0} + {:.0} over {:.4} s and {:.4} s",
            r.send_span_ns,
            r.offered_pps,
            r.tx_seconds,
            r.directions[0].offered_pps,
            r.directions[1].offered_pps,
            r.directions[0].tx_seconds,
            r.directions[1].tx_seconds
        );
        // The two generators ran at once (one clock: their spans overlap).
        let (a, b) = (spans[0], spans[1]);
        assert!(a.0.max(b.0) < a.1.min(b.1), "no overlap: {spans:?}");
        // The common span runs from the earlier start to the later end.
        assert_eq!(r.send_span_ns, Some((a.0.min(b.0), a.1.max(b.1))));
        let common = (a.1.max(b.1) - a.0.min(b.0)) as f64 / 1e9;
        assert!(
            (r.tx_seconds - common).abs() < 1e-9,
            "{} {common}",
            r.tx_seconds
        );
        for d in &r.directions {
            assert!(r.tx_seconds >= d.tx_seconds, "{r:#?}");
        }
        // The aggregate: every frame over that span, at most the sum of
        // the directions' rates each over its own.
        assert_eq!(r.sent, 40_000, "{r:#?}");
        assert!((r.offered_pps - r.sent as f64 / common).abs() < 1e-6);
        assert!(
            r.offered_pps <= own * (1.0 + 1e-12),
            "{} > {own}",
            r.offered_pps
        );
        for (d, name) in r.directions.iter().zip(["forward", "reverse"]) {
            check(name, d);
        }
    });
}
