pub mod common;
pub mod demo;
pub mod fwd;
pub mod fwd_xdp;
pub mod testbed;
