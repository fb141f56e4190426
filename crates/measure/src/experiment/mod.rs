//! Full factorial experiments analysed by allocation of variation (ANOVA),
//! after Jain, "The Art of Computer Systems Performance Analysis",
//! chapters 18-22, generalised to k factors with r replications.
//!
//! [`Design`] names the factors and their levels, [`Observations`] holds one
//! response y per combination of levels and replication, and [`anova`]
//! computes effects, sums of squares, F tests and confidence intervals.
//! [`Anova`] prints as a text table in the layout of Jain's ANOVA tables
//! (see [`Anova::table`]) or serialises to JSON.

mod analysis;
mod design;
mod report;
pub mod runner;
pub mod spec;

pub use analysis::{
    anova, Anova, AnovaOptions, Component, Effect, EffectGroup, ErrorTerm, Transform,
};
pub use design::{Design, Factor, Observations, MAX_FACTORS, MAX_OBSERVATIONS};

/// An input problem; the message is one line naming it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExperimentError {
    #[error("experiment: {0}")]
    Design(String),
    #[error("experiment: {0}")]
    Observation(String),
}
