//! Pipelines: stages joined by batches. Today the L2 forwarder ([`fwd`]).

pub mod capture;
pub mod control;
pub mod count;
pub mod event;
pub mod fuzz;
pub mod fwd;
pub mod generate;
pub mod switch;
