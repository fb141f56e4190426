pub mod bench;
pub mod common;
pub mod count;
pub mod experiment;
pub mod fwd;
pub mod fwd_xdp;
pub mod gen;
pub mod testbed;
