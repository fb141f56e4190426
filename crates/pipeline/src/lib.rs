//! Pipelines: stages joined by batches, each with the loop that runs it and
//! its whole run (open the ports, the threads, a tick once a second, the
//! final account): the L2 forwarder ([`fwd`]), the flow-table switch
//! ([`switch`]), the capture layer ([`capture`]), the traffic generator
//! ([`generate`]) and the receiver ([`receiver`]); what a run reports
//! ([`event`]), its Prometheus view ([`metrics`]) and the control sockets
//! ([`ctl`]).

pub mod capture;
pub mod ctl;
pub mod event;
pub mod fuzz;
pub mod fwd;
pub mod generate;
pub mod metrics;
pub mod perf;
pub mod poll;
pub mod receiver;
pub mod switch;
