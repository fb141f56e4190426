//! Frame sizes of the bench: bytes on the wire with FCS (64..=1518), or
//! [`IMIX`], FD.io CSIT's IPv4 IMIX: 64, 570 and 1518-byte frames in the
//! ratio 7:4:1, interleaved (the generator's
//! [`linerate_io::xdp::generator::IMIX_CSIT`]). The IMIX travels through the same
//! `u32` fields as the fixed sizes (a value no frame has); it reads
//! "imix" in tables, reports and JSON.

use serde::{Deserialize, Deserializer, Serializer};

/// The size that stands for the IMIX (not a length).
pub const IMIX: u32 = 1;

/// Mean bytes on the wire of an IMIX frame, FCS included:
/// (7 x 64 + 4 x 570 + 1518) / 12.
pub const IMIX_MEAN_BYTES: f64 = (7.0 * 64.0 + 4.0 * 570.0 + 1518.0) / 12.0;

/// The IMIX's frames in words, for every table that shows an IMIX figure
/// (its mean alone does not say what was sent).
pub const IMIX_MIX: &str = "IPv4 IMIX 64/570/1518 B at 7:4:1";

/// Bytes on the wire with FCS (the IMIX's mean): for Gbit/s and line rates.
pub fn wire_bytes(size: u32) -> f64 {
    if size == IMIX {
        IMIX_MEAN_BYTES
    } else {
        size as f64
    }
}

/// "imix" or the number.
pub fn label(size: u32) -> String {
    if size == IMIX {
        "imix".into()
    } else {
        size.to_string()
    }
}

/// "imix" or the number, with its unit: "imix" or "64 B".
pub fn label_b(size: u32) -> String {
    if size == IMIX {
        "imix".into()
    } else {
        format!("{size} B")
    }
}

/// "imix (IPv4 IMIX 64/570/1518 B at 7:4:1, mean 353.8 B)" or the number
/// of bytes: a table's frame cell, where the IMIX must say its mix.
pub fn label_mix(size: u32) -> String {
    if size == IMIX {
        format!("imix ({IMIX_MIX}, mean {IMIX_MEAN_BYTES:.1} B)")
    } else {
        size.to_string()
    }
}

/// A frame size from the command line: "imix" or 64..=1518.
pub fn parse(s: &str) -> Result<u32, String> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("imix") {
        return Ok(IMIX);
    }
    match s.parse::<u32>() {
        Ok(v) if (64..=1518).contains(&v) => Ok(v),
        _ => Err(format!(
            "{s:?}: a frame size is 64..=1518 (bytes on the wire, with FCS) or imix"
        )),
    }
}

/// A valid size: 64..=1518 or the IMIX.
pub fn is_valid(size: u32) -> bool {
    size == IMIX || (64..=1518).contains(&size)
}

/// Serde for a frame size field: "imix" or the number.
pub mod serde_size {
    use super::*;

    pub fn serialize<S: Serializer>(size: &u32, s: S) -> Result<S::Ok, S::Error> {
        if *size == IMIX {
            s.serialize_str("imix")
        } else {
            s.serialize_u32(*size)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Size {
            N(u32),
            S(String),
        }
        match Size::deserialize(d)? {
            Size::N(n) => Ok(n),
            Size::S(s) if s == "imix" => Ok(IMIX),
            Size::S(s) => Err(serde::de::Error::custom(format!("frame size {s:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_label_and_round_trip() {
        assert_eq!(parse("imix"), Ok(IMIX));
        assert_eq!(parse("IMIX"), Ok(IMIX));
        assert_eq!(parse("64"), Ok(64));
        assert!(parse("63").is_err() && parse("1519").is_err() && parse("x").is_err());
        assert_eq!(label(IMIX), "imix");
        assert_eq!(label_b(512), "512 B");
        assert_eq!(label_mix(512), "512");
        assert_eq!(
            label_mix(IMIX),
            "imix (IPv4 IMIX 64/570/1518 B at 7:4:1, mean 353.8 B)"
        );
        assert!((IMIX_MEAN_BYTES - 353.8333).abs() < 1e-3);
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct T {
            #[serde(with = "serde_size")]
            s: u32,
        }
        for s in [IMIX, 64, 1518] {
            let j = serde_json::to_string(&T { s }).unwrap();
            assert_eq!(serde_json::from_str::<T>(&j).unwrap(), T { s });
        }
        assert_eq!(
            serde_json::to_string(&T { s: IMIX }).unwrap(),
            r#"{"s":"imix"}"#
        );
    }
}
