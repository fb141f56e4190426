pub mod bench;
pub mod common;
pub mod fwd;
pub mod fwd_xdp;
pub mod testbed;
