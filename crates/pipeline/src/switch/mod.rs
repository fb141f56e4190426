//! The flow-table switch core (issue 5): rules in `ovs-ofctl` syntax
//! ([`rule`]), packet keys ([`key`]), a linear reference classifier
//! ([`reference`]), a tuple-space-search classifier ([`classifier`]) and a
//! per-core exact-match cache in front of it ([`emc`]).

pub mod actions;
pub mod classifier;
pub mod ctl;
pub mod datapath;
pub mod emc;
pub mod key;
pub mod reference;
pub mod rule;
pub mod run;
pub mod table;

pub use classifier::{Classifier, LookupStats, RuleId};
pub use datapath::{Datapath, SwDrop, SwitchPort};
pub use emc::{Emc, EmcStats};
pub use key::Key;
pub use reference::Reference;
pub use rule::{Action, Match, MatchSpec, ParseError, Rule, SetField};

#[cfg(test)]
mod tests;
pub use table::{Control, FlowTable};
