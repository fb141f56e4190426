//! Per-stream sequence tracking: loss, reordering and duplicates, exact
//! within a sliding window of [`WINDOW`] sequence numbers, O(1) per packet
//! and no allocation after construction.
//!
//! Definitions (sequences start at 0 in every stream):
//! - `max_seq`: the highest sequence number received so far.
//! - `unique`: distinct sequence numbers received.
//! - `lost = (max_seq + 1) - unique`: sequence numbers at or below the
//!   highest one seen that have not arrived (yet). Live, this includes
//!   packets that are only late; a late arrival removes itself from `lost`.
//!   Evaluated at the end it is the final loss.
//! - `reordered`: packets whose sequence number is lower than the highest
//!   seen before them and was not received before (each is also counted in
//!   `unique`, so it leaves `lost`).
//! - `duplicates`: packets whose sequence number was already received
//!   (not counted in `unique`).
//! - `out_of_window`: packets more than [`WINDOW`] - 1 below `max_seq`: the
//!   window no longer says whether they were seen. They are assumed new
//!   (counted as reordered and unique), so a duplicate that old would be
//!   counted as a late arrival and lower `lost` by one; `lost` never goes
//!   below 0.

/// Sequence numbers remembered behind the highest one (a power of two).
pub const WINDOW: u64 = 1 << 16;
const WORDS: usize = (WINDOW / 64) as usize;

/// What [`SeqWindow::on_seq`] decided about one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqClass {
    /// The highest sequence number so far (possibly after a gap).
    InOrder,
    /// Lower than the highest seen, not seen before (a late arrival).
    Reordered,
    /// Already received.
    Duplicate,
    /// Too far behind the window to tell; counted as reordered.
    OutOfWindow,
}

/// Sliding-window bitmap of the sequence numbers received by one stream.
pub struct SeqWindow {
    /// Bit `s % WINDOW` says whether `s` was received, for
    /// `max_seq - WINDOW < s <= max_seq`.
    bits: Box<[u64; WORDS]>,
    any: bool,
    max_seq: u64,
    unique: u64,
    reordered: u64,
    duplicates: u64,
    out_of_window: u64,
}

impl Default for SeqWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqWindow {
    /// Allocates the 8 KiB bitmap (once per stream).
    pub fn new() -> SeqWindow {
        SeqWindow {
            bits: Box::new([0u64; WORDS]),
            any: false,
            max_seq: 0,
            unique: 0,
            reordered: 0,
            duplicates: 0,
            out_of_window: 0,
        }
    }

    #[inline(always)]
    fn test_and_set(&mut self, s: u64) -> bool {
        let slot = (s & (WINDOW - 1)) as usize;
        let (w, b) = (slot / 64, slot % 64);
        let was = self.bits[w] >> b & 1 != 0;
        self.bits[w] |= 1 << b;
        was
    }

    /// Clear the bits of sequence numbers `from..to` (`to - from < WINDOW`).
    #[inline(always)]
    fn clear_range(&mut self, from: u64, to: u64) {
        let mut t = from;
        while t < to {
            let slot = t & (WINDOW - 1);
            let (w, b) = ((slot / 64) as usize, slot % 64);
            let n = (64 - b).min(to - t);
            let mask = if n == 64 { !0 } else { ((1u64 << n) - 1) << b };
            self.bits[w] &= !mask;
            t += n;
        }
    }

    /// Account one received sequence number.
    #[inline]
    pub fn on_seq(&mut self, s: u64) -> SeqClass {
        if !self.any || s > self.max_seq {
            let from = if self.any { self.max_seq + 1 } else { 0 };
            // Slots of the skipped numbers still hold bits of numbers that
            // just left the window: clear them (amortised O(1): every
            // number is cleared at most once, a jump past the whole window
            // clears the bitmap once).
            if s - from >= WINDOW {
                self.bits.fill(0);
            } else {
                self.clear_range(from, s);
            }
            self.any = true;
            self.max_seq = s;
            self.test_and_set(s);
            self.unique += 1;
            return SeqClass::InOrder;
        }
        if self.max_seq - s >= WINDOW {
            self.out_of_window += 1;
            self.reordered += 1;
            self.unique += 1;
            return SeqClass::OutOfWindow;
        }
        if self.test_and_set(s) {
            self.duplicates += 1;
            SeqClass::Duplicate
        } else {
            self.reordered += 1;
            self.unique += 1;
            SeqClass::Reordered
        }
    }

    /// Highest sequence number received, `None` before the first.
    pub fn max_seq(&self) -> Option<u64> {
        self.any.then_some(self.max_seq)
    }
    /// Sequence numbers the stream should have delivered so far (`max_seq + 1`).
    pub fn expected(&self) -> u64 {
        if self.any {
            self.max_seq.saturating_add(1)
        } else {
            0
        }
    }
    pub fn unique(&self) -> u64 {
        self.unique
    }
    /// `(max_seq + 1) - unique`, never below 0.
    pub fn lost(&self) -> u64 {
        self.expected().saturating_sub(self.unique)
    }
    pub fn reordered(&self) -> u64 {
        self.reordered
    }
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }
    pub fn out_of_window(&self) -> u64 {
        self.out_of_window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(seqs: &[u64]) -> SeqWindow {
        let mut w = SeqWindow::new();
        for &s in seqs {
            w.on_seq(s);
        }
        w
    }

    #[test]
    fn brief_example() {
        let w = run(&[0, 1, 3, 2, 4, 4, 6]);
        assert_eq!(w.max_seq(), Some(6));
        assert_eq!(w.unique(), 6);
        assert_eq!(w.lost(), 1);
        assert_eq!(w.reordered(), 1);
        assert_eq!(w.duplicates(), 1);
    }

    #[test]
    fn gaps_then_late_fill() {
        let w = run(&[0, 5, 10]);
        assert_eq!(w.lost(), 8);
        let mut w = w;
        assert_eq!(w.on_seq(3), SeqClass::Reordered);
        assert_eq!(w.on_seq(3), SeqClass::Duplicate);
        assert_eq!(w.on_seq(10), SeqClass::Duplicate);
        assert_eq!(w.on_seq(0), SeqClass::Duplicate);
        assert_eq!(w.lost(), 7);
        assert_eq!((w.reordered(), w.duplicates()), (1, 3));
    }

    #[test]
    fn stream_not_starting_at_zero_counts_leading_loss() {
        let w = run(&[100, 101]);
        assert_eq!(w.lost(), 100);
    }

    #[test]
    fn window_slides_and_forgets_exactly() {
        let mut w = SeqWindow::new();
        // Every number once, skipping 7 and 150_000.
        for s in 0..200_000u64 {
            if s != 7 && s != 150_000 {
                assert_eq!(w.on_seq(s), SeqClass::InOrder);
            }
        }
        assert_eq!(w.lost(), 2);
        // 150_000 is within the window: a late arrival, then a duplicate.
        assert_eq!(w.on_seq(150_000), SeqClass::Reordered);
        assert_eq!(w.on_seq(150_000), SeqClass::Duplicate);
        assert_eq!(w.lost(), 1);
        // Oldest number still in the window: known to be a duplicate.
        assert_eq!(w.on_seq(199_999 - WINDOW + 1), SeqClass::Duplicate);
        // One older: out of the window, assumed a late arrival (it is really
        // a duplicate, so lost drops to 0 although 7 is missing: documented).
        assert_eq!(w.on_seq(199_999 - WINDOW), SeqClass::OutOfWindow);
        assert_eq!(w.lost(), 0);
        assert_eq!(
            (w.reordered(), w.out_of_window(), w.duplicates()),
            (2, 1, 2)
        );
        // Re-deliver a recent one: duplicate, even after the bitmap wrapped 3 times.
        assert_eq!(w.on_seq(199_000), SeqClass::Duplicate);
    }

    #[test]
    fn jumps_clear_stale_bits() {
        let mut w = SeqWindow::new();
        w.on_seq(0);
        w.on_seq(1);
        // Jump by exactly WINDOW: slot of 0 and 1 reused; 1 + WINDOW - 1 must read as unseen.
        w.on_seq(1 + WINDOW);
        assert_eq!(w.on_seq(WINDOW), SeqClass::Reordered);
        // Jump by much more than the window.
        w.on_seq(10 * WINDOW + 3);
        assert_eq!(w.on_seq(10 * WINDOW + 2), SeqClass::Reordered);
        assert_eq!(w.on_seq(10 * WINDOW + 3), SeqClass::Duplicate);
        // Partial-word jumps.
        for s in [10 * WINDOW + 70, 10 * WINDOW + 200, 10 * WINDOW + 201] {
            assert_eq!(w.on_seq(s), SeqClass::InOrder);
        }
        for s in (10 * WINDOW + 4)..(10 * WINDOW + 70) {
            assert_eq!(w.on_seq(s), SeqClass::Reordered, "{s}");
        }
        // 0, 1, WINDOW, 1+WINDOW, 10W+2..=10W+70, 10W+200, 10W+201.
        assert_eq!(w.unique(), 4 + 69 + 2);
        assert_eq!(w.lost(), 10 * WINDOW + 202 - 75);
    }

    #[test]
    fn huge_seq_does_not_overflow() {
        let mut w = SeqWindow::new();
        w.on_seq(u64::MAX);
        assert_eq!(w.on_seq(u64::MAX), SeqClass::Duplicate);
        assert_eq!(w.lost(), u64::MAX - 1);
    }
}
