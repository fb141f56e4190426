//! `linerate fwd --mode xdp`: forwarding by an XDP program (devmap redirect).

use super::fwd::Args;
use anyhow::Result;
use linerate_pipeline::fwd::MacRewrite;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub fn run(
    _a: &Args,
    _ab: Option<MacRewrite>,
    _ba: Option<MacRewrite>,
    _stop: Arc<AtomicBool>,
) -> Result<()> {
    anyhow::bail!("--mode xdp: waiting for the in-kernel forwarder module")
}
