pub mod demo;
pub mod fwd;
pub mod testbed;
