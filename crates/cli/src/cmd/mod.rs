pub mod bench;
pub mod common;
pub mod count;
pub mod fwd;
pub mod fwd_xdp;
pub mod gen;
pub mod reap;
pub mod testbed;
