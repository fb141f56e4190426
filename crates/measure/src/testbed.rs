//! The RFC 2544 test bed (being written).
