//! Field value sequences and how a value is patched into a frame.
//!
//! Sequences (value `v_i` of the i-th packet of the stream, i = 0, 1, ...;
//! arithmetic modulo 2^width of the field):
//! - `inc {start, step, count}`: `v_i = start + (i mod count) * step`
//!   (start defaults to the template's value).
//! - `dec {start, step, count}`: `v_i = start - (i mod count) * step`.
//! - `random {min, max, seed}`: splitmix64 seeded with `seed` (default:
//!   stream id * 65536 + field index + 1); spans up to 2^64 take one draw
//!   `r` and reject `r >= floor(2^64 / span) * span`, then `v = min + r mod span`;
//!   wider spans (IPv6) take two draws (high, low) and the same rejection in 128 bits.
//! - `list {values}`: `v_i = values[i mod len]`.
//! - `range {min, max, step}`: `min, min+step, ...` while `<= max`, then `min` again,
//!   i.e. `inc` with `start = min`, `count = (max - min) / step + 1`.

use super::profile::{FieldOp, FieldSpec};

pub use linerate_io::rng::SplitMix64;

/// A compiled value sequence for a field of `width` bits.
#[derive(Clone, Debug)]
pub enum Seq {
    /// Arithmetic sequence: `start + k*step` (dec = negated step) for k in 0..count.
    Arith {
        start: u128,
        step: u128,
        count: u64,
        k: u64,
        cur: u128,
    },
    Random {
        min: u128,
        span: u128,
        rng: SplitMix64,
    },
    List {
        values: Vec<u128>,
        i: usize,
    },
}

impl Seq {
    /// Compile `op` for a field of `width` bits whose template value is `tmpl`.
    /// `parse` turns a profile value into a number for this field.
    pub fn compile(
        op: &FieldOp,
        width: u32,
        tmpl: u128,
        default_seed: u64,
        parse: &dyn Fn(&super::profile::Val) -> Result<u128, String>,
    ) -> Result<Seq, String> {
        let mask = mask(width);
        let fits = |v: u128, what: &str| -> Result<u128, String> {
            if v > mask {
                Err(format!("{what} {v} does not fit in {width} bits"))
            } else {
                Ok(v)
            }
        };
        Ok(match op {
            FieldOp::Inc { start, step, count } | FieldOp::Dec { start, step, count } => {
                if *count == 0 {
                    return Err("count must be at least 1".into());
                }
                let start = match start {
                    Some(v) => fits(parse(v)?, "start")?,
                    None => tmpl,
                };
                let step = (*step as u128) & mask;
                let step = if matches!(op, FieldOp::Dec { .. }) {
                    step.wrapping_neg() & mask
                } else {
                    step
                };
                Seq::Arith {
                    start,
                    step,
                    count: *count,
                    k: 0,
                    cur: start,
                }
            }
            FieldOp::Range { min, max, step } => {
                let (min, max) = (fits(parse(min)?, "min")?, fits(parse(max)?, "max")?);
                if min > max {
                    return Err("range min > max".into());
                }
                if *step == 0 {
                    return Err("range step must be at least 1".into());
                }
                let count = (max - min) / *step as u128 + 1;
                let count = u64::try_from(count).map_err(|_| "range has more than 2^64 values")?;
                Seq::Arith {
                    start: min,
                    step: *step as u128,
                    count,
                    k: 0,
                    cur: min,
                }
            }
            FieldOp::Random { min, max, seed } => {
                let (min, max) = (fits(parse(min)?, "min")?, fits(parse(max)?, "max")?);
                if min > max {
                    return Err("random min > max".into());
                }
                Seq::Random {
                    min,
                    span: (max - min).wrapping_add(1),
                    rng: SplitMix64(seed.unwrap_or(default_seed)),
                }
            }
            FieldOp::List { values } => {
                if values.is_empty() {
                    return Err("list needs at least one value".into());
                }
                let values = values
                    .iter()
                    .map(|v| fits(parse(v)?, "value"))
                    .collect::<Result<Vec<_>, _>>()?;
                Seq::List { values, i: 0 }
            }
        })
    }

    /// The next value (masked to the field width by the caller).
    #[inline(always)]
    pub fn next_value(&mut self) -> u128 {
        match self {
            Seq::Arith {
                start,
                step,
                count,
                k,
                cur,
            } => {
                let v = *cur;
                *k += 1;
                if *k == *count {
                    *k = 0;
                    *cur = *start;
                } else {
                    *cur = cur.wrapping_add(*step);
                }
                v
            }
            Seq::Random { min, span, rng } => {
                let r = if *span != 0 && *span <= u64::MAX as u128 + 1 {
                    rng.below(*span as u64) as u128
                } else {
                    // 128-bit span: two draws, rejection sampling.
                    loop {
                        let r = ((rng.next_u64() as u128) << 64) | rng.next_u64() as u128;
                        if *span == 0 {
                            break r;
                        }
                        let lim = (u128::MAX / *span) * *span;
                        if r < lim {
                            break r % *span;
                        }
                    }
                };
                min.wrapping_add(r)
            }
            Seq::List { values, i } => {
                let v = values[*i];
                *i += 1;
                if *i == values.len() {
                    *i = 0;
                }
                v
            }
        }
    }
}

pub fn mask(width: u32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

/// Where a field lives: an aligned span of `len` (even, <= 16) bytes at
/// `off` in the frame, and the bits of the field inside that span
/// (big-endian, `mask << shift`). Offsets of all checksummed regions are even
/// in the frame, so the span's words are the checksum's words.
#[derive(Clone, Debug)]
pub struct FieldSlot {
    pub off: usize,
    pub len: usize,
    pub shift: u32,
    pub width: u32,
    /// Template span with the field's bits cleared.
    pub base: u128,
    /// `!fold(sum(template span))`, pre-complemented for RFC 1624 eqn 3.
    pub neg_old: u64,
    pub in_ip_csum: bool,
    pub in_l4_csum: bool,
}

/// A compiled field: where it goes and what it takes.
#[derive(Clone, Debug)]
pub struct FieldEngine {
    pub slot: FieldSlot,
    pub seq: Seq,
}

impl FieldEngine {
    /// Write the next value into `frame` (a copy of the template) and return
    /// the one's complement delta (`~m + m'`) to add to the affected checksums.
    #[inline(always)]
    pub fn apply(&mut self, frame: &mut [u8]) -> u64 {
        let s = &self.slot;
        let v = self.seq.next_value() & mask(s.width);
        let span = s.base | (v << s.shift);
        let be = span.to_be_bytes();
        let new = &be[16 - s.len..];
        frame[s.off..s.off + s.len].copy_from_slice(new);
        linerate_wire::checksum::sum(new, s.neg_old)
    }
}

/// Read the template span as a big-endian number.
pub fn read_span(frame: &[u8], off: usize, len: usize) -> u128 {
    let mut be = [0u8; 16];
    be[16 - len..].copy_from_slice(&frame[off..off + len]);
    u128::from_be_bytes(be)
}

/// Compile one field spec against a laid-out template.
pub fn slot_for(
    frame: &[u8],
    off: usize,
    len: usize,
    shift: u32,
    width: u32,
    in_ip_csum: bool,
    in_l4_csum: bool,
) -> (FieldSlot, u128) {
    use linerate_wire::checksum::{fold, sum};
    let span = read_span(frame, off, len);
    let fmask = mask(width) << shift;
    let tmpl = (span & fmask) >> shift;
    let neg_old = (!fold(sum(&frame[off..off + len], 0))) as u64;
    (
        FieldSlot {
            off,
            len,
            shift,
            width,
            base: span & !fmask,
            neg_old,
            in_ip_csum,
            in_l4_csum,
        },
        tmpl,
    )
}

/// `FieldSpec` is used by the generator; re-exported for tests.
pub type Spec = FieldSpec;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::profile::Val;

    fn seq(op: FieldOp, width: u32, tmpl: u128) -> Vec<u128> {
        let p = |v: &Val| match v {
            Val::Int(i) => Ok(*i as u128),
            Val::Str(s) => s.parse::<u128>().map_err(|e| e.to_string()),
        };
        let mut s = Seq::compile(&op, width, tmpl, 1, &p).unwrap();
        (0..8).map(|_| s.next_value() & mask(width)).collect()
    }

    #[test]
    fn inc_dec_wrap_after_count() {
        let op = FieldOp::Inc {
            start: Some(Val::Int(10)),
            step: 2,
            count: 3,
        };
        assert_eq!(seq(op, 16, 0), [10, 12, 14, 10, 12, 14, 10, 12]);
        // start defaults to the template value; arithmetic wraps at the field width
        let op = FieldOp::Inc {
            start: None,
            step: 1,
            count: 4,
        };
        assert_eq!(seq(op, 8, 254), [254, 255, 0, 1, 254, 255, 0, 1]);
        let op = FieldOp::Dec {
            start: Some(Val::Int(1)),
            step: 1,
            count: 3,
        };
        assert_eq!(seq(op, 16, 0), [1, 0, 65535, 1, 0, 65535, 1, 0]);
    }

    #[test]
    fn range_and_list_cycle() {
        let op = FieldOp::Range {
            min: Val::Int(5),
            max: Val::Int(11),
            step: 3,
        };
        assert_eq!(seq(op, 16, 0), [5, 8, 11, 5, 8, 11, 5, 8]);
        let op = FieldOp::List {
            values: vec![Val::Int(7), Val::Int(1), Val::Int(3)],
        };
        assert_eq!(seq(op, 16, 0), [7, 1, 3, 7, 1, 3, 7, 1]);
    }

    #[test]
    fn random_is_seeded_and_in_bounds() {
        let op = |seed| FieldOp::Random {
            min: Val::Int(100),
            max: Val::Int(103),
            seed: Some(seed),
        };
        let a = seq(op(42), 16, 0);
        assert_eq!(a, seq(op(42), 16, 0));
        assert_ne!(a, seq(op(43), 16, 0));
        // exact: splitmix64(42) draws reduced mod 4 (4 divides 2^64: no rejection)
        let mut r = SplitMix64(42);
        let want: Vec<u128> = (0..8).map(|_| 100 + (r.next_u64() % 4) as u128).collect();
        assert_eq!(a, want);
        // all values hit, none outside
        let p = |v: &Val| match v {
            Val::Int(i) => Ok(*i as u128),
            _ => Err(String::new()),
        };
        let mut s = Seq::compile(&op(1), 16, 0, 1, &p).unwrap();
        let mut hits = [0u32; 4];
        for _ in 0..40_000 {
            let v = s.next_value();
            assert!((100..=103).contains(&v));
            hits[(v - 100) as usize] += 1;
        }
        for h in hits {
            assert!((9_000..11_000).contains(&h), "{hits:?}");
        }
        // full 128-bit span works
        let op = FieldOp::Random {
            min: Val::Int(0),
            max: Val::Str(u128::MAX.to_string()),
            seed: Some(1),
        };
        let p2 = |v: &Val| match v {
            Val::Int(i) => Ok(*i as u128),
            Val::Str(s) => s.parse::<u128>().map_err(|e| e.to_string()),
        };
        let mut s = Seq::compile(&op, 128, 0, 1, &p2).unwrap();
        assert_ne!(s.next_value(), s.next_value());
    }

    #[test]
    fn below_has_no_modulo_bias_limit() {
        let mut r = SplitMix64(3);
        for span in [1u64, 2, 3, 7, 1 << 63, (1 << 63) + 1, u64::MAX] {
            for _ in 0..100 {
                assert!(r.below(span) < span);
            }
        }
    }

    #[test]
    fn bad_specs_are_errors() {
        let p = |v: &Val| match v {
            Val::Int(i) => Ok(*i as u128),
            _ => Err("not a number".to_string()),
        };
        let e = Seq::compile(
            &FieldOp::Range {
                min: Val::Int(5),
                max: Val::Int(1),
                step: 1,
            },
            16,
            0,
            1,
            &p,
        )
        .unwrap_err();
        assert_eq!(e, "range min > max");
        let e = Seq::compile(
            &FieldOp::List {
                values: vec![Val::Int(300)],
            },
            8,
            0,
            1,
            &p,
        )
        .unwrap_err();
        assert!(e.contains("does not fit in 8 bits"), "{e}");
    }
}
