//! The `pcap` port backend (being written).

use crate::port::{OpenOptions, Port, PortError};
use crate::uri::Uri;

pub fn open(uri: &Uri, _opts: &OpenOptions) -> Result<Port, PortError> {
    Err(uri.err("the pcap backend is not built yet"))
}
