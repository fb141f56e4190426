//! The flow-table switch core (issue 5): rules in `ovs-ofctl` syntax
//! ([`rule`]), packet keys ([`key`]), a linear reference classifier
//! ([`reference`]), a tuple-space-search classifier ([`classifier`]) and a
//! per-core exact-match cache in front of it ([`emc`]). Multi-table
//! pipelines (issue 22): tables 0..254 ([`table`]), a packet's walk through
//! them with `goto_table`, `resubmit`, registers and metadata ([`xlate`],
//! operands in [`field`]), `learn(...)` ([`learn`]) and `normal`
//! ([`normal`]).

pub mod actions;
pub mod classifier;
pub mod controller;
pub mod counters;
pub mod ctl;
pub mod datapath;
pub mod emc;
pub mod field;
pub mod group;
pub mod key;
pub mod learn;
pub mod learner;
pub mod link;
pub mod megaflow;
pub mod normal;
pub mod offload;
pub mod openflow;
pub mod reference;
pub mod rule;
pub mod run;
pub mod table;
pub mod xlate;

pub use classifier::{Classifier, LookupStats, RuleId};
pub use counters::SwDrop;
pub use datapath::{Datapath, SwitchPort};
pub use emc::{Emc, EmcStats};
pub use key::Key;
pub use reference::Reference;
pub use rule::{Action, Match, MatchSpec, ParseError, Rule, SetField};

#[cfg(test)]
mod live_rules_tests;
#[cfg(test)]
mod pipeline_tests;
#[cfg(test)]
mod tests;
pub use table::{FlowTable, TableHandle};
