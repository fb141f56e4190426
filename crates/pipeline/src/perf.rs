//! Cycles per stage, kept apart from the datapaths the way Open vSwitch
//! keeps `dpif-netdev-perf` apart from `dpif-netdev`: each pipeline names
//! its stages ([`Stage`]), and one [`Cycles`] counts TSC cycles per stage,
//! batches, empty polls and their idle cycles, for `--profile`.

use linerate_io::counters::bump;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A pipeline's stages, in the order its profile prints them.
pub trait Stage: Copy + 'static {
    const ALL: &'static [Self];
    fn name(self) -> &'static str;
    /// Below [`MAX_STAGES`].
    fn index(self) -> usize;
}

/// Room for this many stages per pipeline.
pub const MAX_STAGES: usize = 8;

/// TSC cycles per stage (one writer: the pipeline's thread; read by the
/// reporter).
#[derive(Debug)]
pub struct Cycles<S: Stage> {
    stages: [AtomicU64; MAX_STAGES],
    idle: AtomicU64,
    batches: AtomicU64,
    empty_polls: AtomicU64,
    _s: PhantomData<S>,
}

impl<S: Stage> Default for Cycles<S> {
    fn default() -> Self {
        Cycles {
            stages: Default::default(),
            idle: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            empty_polls: AtomicU64::new(0),
            _s: PhantomData,
        }
    }
}

impl<S: Stage> Cycles<S> {
    /// `cycles` more spent in `stage`.
    #[inline(always)]
    pub fn add(&self, stage: S, cycles: u64) {
        bump(&self.stages[stage.index()], cycles);
    }
    /// One more batch handled.
    #[inline(always)]
    pub fn batch(&self) {
        bump(&self.batches, 1);
    }
    /// A poll that found nothing, and the cycles it took.
    #[inline(always)]
    pub fn empty_poll(&self, cycles: u64) {
        bump(&self.idle, cycles);
        bump(&self.empty_polls, 1);
    }
    pub fn snapshot(&self) -> CyclesSnapshot<S> {
        let mut s = CyclesSnapshot {
            idle: self.idle.load(Relaxed),
            batches: self.batches.load(Relaxed),
            empty_polls: self.empty_polls.load(Relaxed),
            ..CyclesSnapshot::default()
        };
        for (d, c) in s.stages.iter_mut().zip(&self.stages) {
            *d = c.load(Relaxed);
        }
        s
    }
}

/// A plain copy of [`Cycles`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CyclesSnapshot<S: Stage> {
    stages: [u64; MAX_STAGES],
    /// Cycles of polls that returned nothing.
    pub idle: u64,
    pub batches: u64,
    pub empty_polls: u64,
    _s: PhantomData<S>,
}

impl<S: Stage> Default for CyclesSnapshot<S> {
    fn default() -> Self {
        CyclesSnapshot {
            stages: [0; MAX_STAGES],
            idle: 0,
            batches: 0,
            empty_polls: 0,
            _s: PhantomData,
        }
    }
}

impl<S: Stage> std::ops::AddAssign for CyclesSnapshot<S> {
    fn add_assign(&mut self, o: Self) {
        for (a, b) in self.stages.iter_mut().zip(o.stages) {
            *a += b;
        }
        self.idle += o.idle;
        self.batches += o.batches;
        self.empty_polls += o.empty_polls;
    }
}

impl<S: Stage> CyclesSnapshot<S> {
    pub fn of(&self, stage: S) -> u64 {
        self.stages[stage.index()]
    }
    /// Every stage's cycles.
    pub fn total(&self) -> u64 {
        self.stages.iter().sum()
    }
    /// (stage name, cycles per packet) in the stages' order, then
    /// ("total", ...), over `packets`.
    pub fn per_packet(&self, packets: u64) -> Vec<(&'static str, f64)> {
        let p = packets.max(1) as f64;
        S::ALL
            .iter()
            .map(|s| (s.name(), self.of(*s) as f64 / p))
            .chain([("total", self.total() as f64 / p)])
            .collect()
    }
    /// [`Self::per_packet`] as a JSON object.
    pub fn per_packet_json(&self, packets: u64) -> serde_json::Value {
        serde_json::Value::Object(
            self.per_packet(packets)
                .into_iter()
                .map(|(n, c)| (n.to_string(), serde_json::json!(c)))
                .collect(),
        )
    }
}

/// Whether `S::ALL` lists every stage at its own index within
/// [`MAX_STAGES`] (each stage type's unit test asserts it).
pub fn stages_fit<S: Stage>() -> bool {
    S::ALL.len() <= MAX_STAGES && S::ALL.iter().enumerate().all(|(i, s)| s.index() == i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug)]
    enum T {
        A,
        B,
    }
    impl Stage for T {
        const ALL: &'static [T] = &[T::A, T::B];
        fn name(self) -> &'static str {
            match self {
                T::A => "a",
                T::B => "b",
            }
        }
        fn index(self) -> usize {
            self as usize
        }
    }

    #[test]
    fn per_packet_and_sums() {
        assert!(stages_fit::<T>());
        let c = Cycles::<T>::default();
        c.add(T::A, 300);
        c.add(T::B, 100);
        c.batch();
        c.empty_poll(7);
        let mut s = c.snapshot();
        assert_eq!(
            s.per_packet(4),
            vec![("a", 75.0), ("b", 25.0), ("total", 100.0)]
        );
        assert_eq!((s.idle, s.batches, s.empty_polls), (7, 1, 1));
        s += c.snapshot();
        assert_eq!((s.of(T::A), s.total(), s.batches), (600, 800, 2));
        assert_eq!(s.per_packet_json(8)["total"], 100.0);
    }
}
