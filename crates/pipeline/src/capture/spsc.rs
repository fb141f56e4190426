//! A bounded single-producer single-consumer ring with batched push and pop.
//!
//! Slots are allocated once, at creation, by a caller's `init` function and
//! are reused forever: a push writes *into* the next free slot in place (the
//! packet ring copies frame bytes into a slot's fixed buffer), a pop reads a
//! slot in place. Nothing is allocated, locked or system-called per element.
//!
//! # Indices and memory ordering
//!
//! `tail` (next slot the producer will publish) and `head` (next slot the
//! consumer will read) are free-running `usize` counters; the slot of index
//! `i` is `i & mask` (capacity is a power of two), `tail - head` (wrapping)
//! is the number of readable slots, always `<= capacity`.
//!
//! * Producer: writes slot contents with plain stores, then publishes them
//!   with `tail.store(new, Release)`. The consumer's `tail.load(Acquire)`
//!   that observes `new` synchronises with that store, so every slot write
//!   made before it is visible to the consumer (no torn packets).
//! * Consumer: reads slots, then frees them with `head.store(new, Release)`.
//!   The producer's `head.load(Acquire)` that observes `new` synchronises
//!   with it, so the consumer's reads of those slots happen-before the
//!   producer's next writes to them (a slot is never overwritten while it
//!   is being read).
//! * Each side owns its own index and only ever reads the other one, so no
//!   read-modify-write (no `lock` prefix) is needed. Each side also caches
//!   the last value it saw of the other's index and reloads it only when the
//!   cache says "full" (producer) or "empty" (consumer): the shared cache
//!   lines are touched about once per batch, not once per element.
//! * `head` and `tail` sit on separate 128-byte-aligned lines (two lines:
//!   the adjacent-line prefetcher of x86 pulls pairs) so the two cores do not
//!   false-share.
//!
//! Batching: [`Producer::push_with`] fills slots but publishes nothing;
//! [`Producer::flush`] publishes everything pushed so far with one store.
//! [`Consumer::pop_with`] reads up to `max` slots and frees them with one
//! store at the end.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Pads and aligns a value to 128 bytes (two cache lines).
#[repr(align(128))]
#[derive(Default, Debug)]
pub struct CachePadded<T>(pub T);

struct Shared<T> {
    tail: CachePadded<AtomicUsize>,
    head: CachePadded<AtomicUsize>,
    mask: usize,
    closed: AtomicBool,
    slots: Box<[UnsafeCell<T>]>,
}

// SAFETY: slot access is partitioned between the one producer and the one
// consumer by the head/tail protocol described in the module docs; a slot is
// only ever accessed by one side at a time, and T moves between threads.
unsafe impl<T: Send> Sync for Shared<T> {}
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Shared<T> {
    #[inline(always)]
    fn cap(&self) -> usize {
        self.mask + 1
    }
    #[inline(always)]
    fn len(&self) -> usize {
        // A gauge: the value is a hint, never used to access slots. Head is
        // loaded with Acquire so the tail load cannot be satisfied before it
        // (weakly ordered CPUs): tail only grows and is always >= head, so a
        // tail read after the head read is >= that head and the difference
        // never wraps (a stale head can only overstate, bounded by cap).
        let h = self.head.0.load(Ordering::Acquire);
        let t = self.tail.0.load(Ordering::Relaxed);
        t.wrapping_sub(h).min(self.cap())
    }
}

/// The producing end. Not `Clone`: exactly one producer.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    /// Next index to write (>= the published tail).
    tail: usize,
    /// Last head seen (the consumer's progress), refreshed when we look full.
    head_cache: usize,
}

/// The consuming end. Not `Clone`: exactly one consumer.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    /// Next index to read.
    head: usize,
    /// Last tail seen, refreshed when we look empty.
    tail_cache: usize,
}

/// Occupancy of a ring readable from any thread (for TED and stats).
#[derive(Clone)]
pub struct Gauge {
    shared: Arc<dyn GaugeSource>,
}

trait GaugeSource: Send + Sync {
    fn used(&self) -> usize;
    fn capacity(&self) -> usize;
}

impl<T: Send> GaugeSource for Shared<T> {
    fn used(&self) -> usize {
        self.len()
    }
    fn capacity(&self) -> usize {
        self.cap()
    }
}

impl Gauge {
    /// Published elements not yet consumed.
    pub fn used(&self) -> usize {
        self.shared.used()
    }
    pub fn capacity(&self) -> usize {
        self.shared.capacity()
    }
    /// `used / capacity` in [0, 1].
    pub fn fraction(&self) -> f64 {
        self.used() as f64 / self.capacity() as f64
    }
}

/// Make a ring of `capacity` slots (rounded up to a power of two, at least 2),
/// each initialised once with `init()`.
pub fn channel<T: Send + 'static>(
    capacity: usize,
    mut init: impl FnMut() -> T,
) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots: Box<[UnsafeCell<T>]> = (0..cap).map(|_| UnsafeCell::new(init())).collect();
    let shared = Arc::new(Shared {
        tail: CachePadded(AtomicUsize::new(0)),
        head: CachePadded(AtomicUsize::new(0)),
        mask: cap - 1,
        closed: AtomicBool::new(false),
        slots,
    });
    (
        Producer {
            shared: shared.clone(),
            tail: 0,
            head_cache: 0,
        },
        Consumer {
            shared,
            head: 0,
            tail_cache: 0,
        },
    )
}

impl<T: Send + 'static> Producer<T> {
    /// A gauge of this ring's occupancy.
    pub fn gauge(&self) -> Gauge {
        Gauge {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Send + 'static> Consumer<T> {
    pub fn gauge(&self) -> Gauge {
        Gauge {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Producer<T> {
    pub fn capacity(&self) -> usize {
        self.shared.cap()
    }

    /// Free slots as the producer sees them (refreshes the consumer's index).
    pub fn free(&mut self) -> usize {
        self.head_cache = self.shared.head.0.load(Ordering::Acquire);
        self.shared.cap() - self.tail.wrapping_sub(self.head_cache)
    }

    /// Published + pending elements not yet consumed, as last seen.
    pub fn used(&self) -> usize {
        self.shared.len()
    }

    /// Write the next element in place with `fill` (it gets the slot's old
    /// contents to overwrite). Returns false, without calling `fill`, when
    /// the ring is full. Not visible to the consumer until [`flush`](Self::flush).
    #[inline]
    pub fn push_with(&mut self, fill: impl FnOnce(&mut T)) -> bool {
        if self.tail.wrapping_sub(self.head_cache) >= self.shared.cap() {
            // Looks full: reload the consumer's index (Acquire: see module docs).
            self.head_cache = self.shared.head.0.load(Ordering::Acquire);
            if self.tail.wrapping_sub(self.head_cache) >= self.shared.cap() {
                return false;
            }
        }
        let slot = &self.shared.slots[self.tail & self.shared.mask];
        // SAFETY: index `tail` is in [head, head + cap) so the consumer does
        // not access this slot until we publish a tail beyond it; we are the
        // only producer (`&mut self`).
        fill(unsafe { &mut *slot.get() });
        self.tail = self.tail.wrapping_add(1);
        true
    }

    /// Push a value (overwriting the slot). Returns it back when full.
    #[inline]
    pub fn push(&mut self, v: T) -> Result<(), T> {
        let mut v = Some(v);
        if self.push_with(|s| *s = v.take().expect("taken once")) {
            Ok(())
        } else {
            Err(v.take().expect("not taken"))
        }
    }

    /// Elements pushed but not yet published.
    pub fn pending(&self) -> usize {
        self.tail
            .wrapping_sub(self.shared.tail.0.load(Ordering::Relaxed))
    }

    /// Publish every element pushed so far (one Release store).
    #[inline]
    pub fn flush(&mut self) {
        self.shared.tail.0.store(self.tail, Ordering::Release);
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        self.flush();
        self.shared.closed.store(true, Ordering::Release);
    }
}

impl<T> Consumer<T> {
    pub fn capacity(&self) -> usize {
        self.shared.cap()
    }

    /// Elements published and not yet consumed (refreshes the producer's index).
    pub fn available(&mut self) -> usize {
        self.tail_cache = self.shared.tail.0.load(Ordering::Acquire);
        self.tail_cache.wrapping_sub(self.head)
    }

    /// True when the producer end has been dropped: once [`available`](Self::available)
    /// is 0 after this returned true, nothing more will come.
    pub fn producer_gone(&self) -> bool {
        // Acquire pairs with the Release in Producer::drop, which comes after
        // its final flush: everything published is visible.
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Read up to `max` elements in order, calling `f` on each in place,
    /// then free them all with one store. Returns how many were read.
    #[inline]
    pub fn pop_with(&mut self, max: usize, mut f: impl FnMut(&T)) -> usize {
        let mut avail = self.tail_cache.wrapping_sub(self.head);
        if avail == 0 {
            avail = self.available();
            if avail == 0 {
                return 0;
            }
        }
        let n = avail.min(max);
        for i in 0..n {
            let slot = &self.shared.slots[self.head.wrapping_add(i) & self.shared.mask];
            // SAFETY: indices [head, tail_cache) were published by the
            // producer (Acquire load of tail) and are not written again until
            // we store a head beyond them.
            f(unsafe { &*slot.get() });
        }
        self.head = self.head.wrapping_add(n);
        self.shared.head.0.store(self.head, Ordering::Release);
        n
    }

    /// Pop one element by copy.
    pub fn pop(&mut self) -> Option<T>
    where
        T: Copy,
    {
        let mut out = None;
        self.pop_with(1, |v| out = Some(*v));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_drain() {
        let (mut p, mut c) = channel::<u64>(3, || 0);
        assert_eq!(p.capacity(), 4);
        for i in 0..4 {
            assert!(p.push(i).is_ok());
        }
        assert_eq!(p.push(9), Err(9));
        assert_eq!(c.pop(), None, "nothing published before flush");
        p.flush();
        assert_eq!(p.gauge().used(), 4);
        let mut got = vec![];
        assert_eq!(c.pop_with(3, |v| got.push(*v)), 3);
        assert_eq!(got, vec![0, 1, 2]);
        assert!(p.push(4).is_ok());
        p.flush();
        assert_eq!(c.pop(), Some(3));
        assert_eq!(c.pop(), Some(4));
        assert_eq!(c.pop(), None);
        assert_eq!(c.gauge().used(), 0);
    }

    /// Two threads, small ring, many wraps: every value arrives once, in order.
    #[test]
    fn two_threads_ordered_no_loss_no_dup() {
        const N: u64 = 2_000_000;
        let (mut p, mut c) = channel::<[u64; 2]>(64, || [0, 0]);
        let prod = std::thread::spawn(move || {
            let mut i = 0u64;
            let mut full = 0u64;
            while i < N {
                // Batches of up to 16, one publish per batch.
                let mut k = 0;
                while k < 16 && i < N && p.push_with(|s| *s = [i, !i]) {
                    i += 1;
                    k += 1;
                }
                if k < 16 && i < N {
                    full += 1;
                    std::hint::spin_loop();
                }
                p.flush();
            }
            full
        });
        let mut next = 0u64;
        let mut bad = 0u64;
        while next < N {
            let n = c.pop_with(32, |v| {
                if v[0] != next || v[1] != !next {
                    bad += 1;
                }
                next += 1;
            });
            if n == 0 {
                std::hint::spin_loop();
            }
        }
        prod.join().unwrap();
        assert_eq!(bad, 0);
        assert_eq!(next, N);
        assert_eq!(c.pop_with(1, |_| ()), 0, "no duplicates after the end");
    }
}
