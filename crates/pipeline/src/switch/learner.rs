//! The datapath's side of `learn(...)`: a bounded channel of requests to
//! the learning thread, each learned rule asked for at most once a
//! [`LEARN_REFRESH_NS`] per flow.

use super::key::Key;
use super::learn::{Learn, LearnItem, LearnSrc};
use std::sync::Arc;

/// A `learn(...)` request: the spec and the packet's key at the action;
/// the control side builds the rule ([`Learn::rule`]) and adds it.
pub struct LearnReq {
    pub spec: Arc<Learn>,
    pub key: Key,
}

/// Recent requests remembered, to send each learned rule at most once a
/// [`LEARN_REFRESH_NS`] per flow.
const LEARN_RECENT: usize = 1024;
/// How often the same learned rule is sent again (to restart its idle time).
pub const LEARN_REFRESH_NS: u64 = 1_000_000_000;

/// The datapath's side of `learn(...)`: requests go through a bounded
/// channel (allocated at start: `try_send` neither allocates nor blocks;
/// it wakes the control thread when that thread waits, a futex call, at
/// most once per learned rule and [`LEARN_REFRESH_NS`]). A full channel
/// loses the request (counted); the next packet of the flow asks again.
pub struct Learner {
    tx: Option<std::sync::mpsc::SyncSender<LearnReq>>,
    recent: Box<[(u64, u64)]>,
    pub(super) requests: u64,
    pub(super) queue_full: u64,
}

impl Learner {
    pub(super) fn new(tx: Option<std::sync::mpsc::SyncSender<LearnReq>>) -> Learner {
        Learner {
            tx,
            recent: vec![(0, 0); LEARN_RECENT].into_boxed_slice(),
            requests: 0,
            queue_full: 0,
        }
    }

    /// Send the request unless the same rule was sent in the last
    /// [`LEARN_REFRESH_NS`].
    pub(super) fn post(&mut self, spec: &Arc<Learn>, k: &Key, now_ns: u64) {
        let Some(tx) = &self.tx else { return };
        let mut h = Arc::as_ptr(spec) as u64 ^ 0x9e37_79b9_7f4a_7c15;
        for it in &spec.items {
            let v = match it {
                LearnItem::Match {
                    src: LearnSrc::Field(f),
                    ..
                }
                | LearnItem::Load {
                    src: LearnSrc::Field(f),
                    ..
                }
                | LearnItem::Output(f) => f.read(k),
                _ => continue,
            };
            h = (h ^ v).wrapping_mul(0xbf58_476d_1ce4_e5b9).rotate_left(23);
        }
        let slot = &mut self.recent[h as usize % LEARN_RECENT];
        if slot.0 == h && now_ns.wrapping_sub(slot.1) < LEARN_REFRESH_NS {
            return;
        }
        match tx.try_send(LearnReq {
            spec: spec.clone(),
            key: *k,
        }) {
            Ok(()) => {
                *slot = (h, now_ns);
                self.requests += 1;
            }
            Err(_) => self.queue_full += 1,
        }
    }
}
