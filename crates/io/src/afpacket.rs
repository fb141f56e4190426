//! The `afpacket` port backend (being written).

use crate::port::{OpenOptions, Port, PortError};
use crate::uri::Uri;

pub fn open(uri: &Uri, _opts: &OpenOptions) -> Result<Port, PortError> {
    Err(uri.err("the afpacket backend is not built yet"))
}
