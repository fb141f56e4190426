//! Ports by URI: the scheme names the backend. Above the backends (each
//! imports [`crate::port`] for the types it implements; nothing below
//! imports this).

use crate::port::{OpenOptions, Port, PortError};
use crate::uri::Uri;

/// Open a port by URI (see [`crate::uri`]).
pub fn open(uri: &str, opts: &OpenOptions) -> Result<Port, PortError> {
    let u = Uri::parse(uri)?;
    match u.scheme.as_str() {
        "afxdp" => crate::afxdp::open(&u, opts),
        "afpacket" => crate::afpacket::open(&u, opts),
        "pcap" => crate::pcap::open(&u, opts),
        "mem" => crate::mem::open(&u, opts),
        _ => unreachable!("Uri::parse accepts only known schemes"),
    }
}
