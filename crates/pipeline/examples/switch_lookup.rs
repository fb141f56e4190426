//! Rough numbers for the switch classifier: rule insertion rate and lookup
//! ns/packet with the EMC on and off, for N exact-ish rules (udp, nw_dst /32,
//! tp_dst) plus a few wildcard rules, and F active flows.
//!   cargo run --release -p linerate-pipeline --example switch_lookup -- [RULES] [FLOWS]
//! Not the benchmark (that runs the datapath over mem ports).

use linerate_pipeline::switch::{key, Classifier, Emc, Key, Rule};
use std::time::Instant;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let rules = *args.first().unwrap_or(&100_000);
    let flows = *args.get(1).unwrap_or(&10_000);
    let mut c = Classifier::new();
    for s in [
        "priority=1,actions=drop",
        "priority=10,ip,actions=output:1",
        "priority=20,udp,tp_dst=53,actions=output:2",
        "priority=30,tcp,actions=output:3",
    ] {
        c.insert(&Rule::parse(s).unwrap().m, Rule::parse(s).unwrap().priority);
    }
    let base = Rule::parse("priority=100,udp,nw_dst=10.0.0.1,tp_dst=1,actions=output:1").unwrap();
    let t = Instant::now();
    for i in 0..rules {
        let mut m = base.m;
        m.value.set(key::NW_DST, 0x0a00_0000 | (i >> 8));
        m.value.set(key::TP_DST, i & 0xff);
        c.insert(&m, 100);
    }
    let dt = t.elapsed().as_secs_f64();
    println!(
        "insert {rules} rules: {:.3} s, {:.2} M rules/s, {} subtables",
        dt,
        rules as f64 / dt / 1e6,
        c.subtables()
    );
    let keys: Vec<Key> = (0..flows)
        .map(|i| {
            let mut k = Key::ZERO;
            k.set(key::IN_PORT, 1);
            k.set(key::DL_TYPE, 0x0800);
            k.set(key::NW_PROTO, 17);
            let j = i % rules.max(1);
            k.set(key::NW_DST, 0x0a00_0000 | (j >> 8));
            k.set(key::TP_DST, j & 0xff);
            k.set(key::TP_SRC, i & 0xffff);
            k
        })
        .collect();
    let mut out = vec![None; 32];
    for _ in 0..3 {
        c.rerank();
        let total = 4_000_000u64;
        let t = Instant::now();
        let mut n = 0u64;
        while n < total {
            for ch in keys.chunks(32) {
                c.lookup_batch(ch, &mut out[..ch.len()]);
                n += ch.len() as u64;
            }
        }
        let cls_ns = t.elapsed().as_nanos() as f64 / n as f64;
        let mut emc = Emc::new(8192, 100);
        let t = Instant::now();
        let mut n = 0u64;
        while n < total {
            for ch in keys.chunks(32) {
                emc.lookup_batch(&c, ch, &mut out[..ch.len()]);
                n += ch.len() as u64;
            }
        }
        let emc_ns = t.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "{flows} flows: classifier {cls_ns:.1} ns/pkt, emc+classifier {emc_ns:.1} ns/pkt (emc hits {:.1} %)",
            100.0 * emc.stats.hits as f64 / (emc.stats.hits + emc.stats.misses).max(1) as f64
        );
    }
}
