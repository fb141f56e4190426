//! The design (factors, levels, replications) and the observations.

use serde::{Deserialize, Serialize};

use super::ExperimentError;

/// Most factors accepted: the analysis visits all 2^k subsets of factors.
pub const MAX_FACTORS: usize = 12;
/// Most observations accepted (cells x replications).
pub const MAX_OBSERVATIONS: usize = 1 << 26;

/// One factor and its levels, e.g. "frame size" with "64", "512", "1518".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    pub name: String,
    pub levels: Vec<String>,
}

impl Factor {
    pub fn new(name: impl Into<String>, levels: &[&str]) -> Factor {
        Factor {
            name: name.into(),
            levels: levels.iter().map(|l| l.to_string()).collect(),
        }
    }
}

/// A full factorial design: every combination of levels is run
/// `replications` times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Design {
    pub factors: Vec<Factor>,
    pub replications: usize,
}

impl Design {
    /// A validated design.
    pub fn new(factors: Vec<Factor>, replications: usize) -> Result<Design, ExperimentError> {
        let d = Design {
            factors,
            replications,
        };
        d.validate()?;
        Ok(d)
    }

    /// Checks: at least one factor, at most [`MAX_FACTORS`], every factor
    /// named uniquely with at least 2 distinct levels, r >= 1, and not more
    /// than [`MAX_OBSERVATIONS`] observations.
    pub fn validate(&self) -> Result<(), ExperimentError> {
        let err = |m: String| Err(ExperimentError::Design(m));
        if self.factors.is_empty() {
            return err("the design has no factors; it needs at least one".into());
        }
        if self.factors.len() > MAX_FACTORS {
            return err(format!(
                "the design has {} factors; at most {MAX_FACTORS} are supported",
                self.factors.len()
            ));
        }
        if self.replications == 0 {
            return err("replications must be at least 1".into());
        }
        for (i, f) in self.factors.iter().enumerate() {
            if f.name.trim().is_empty() {
                return err(format!("factor {} has an empty name", i + 1));
            }
            if self.factors[..i].iter().any(|g| g.name == f.name) {
                return err(format!("factor '{}' is named twice", f.name));
            }
            if f.levels.len() < 2 {
                return err(format!(
                    "factor '{}' has {} level(s); a factor needs at least 2",
                    f.name,
                    f.levels.len()
                ));
            }
            for (j, l) in f.levels.iter().enumerate() {
                if f.levels[..j].contains(l) {
                    return err(format!("factor '{}' lists level '{l}' twice", f.name));
                }
            }
        }
        let mut n: usize = self.replications;
        for f in &self.factors {
            n = match n.checked_mul(f.levels.len()) {
                Some(n) if n <= MAX_OBSERVATIONS => n,
                _ => {
                    return err(format!(
                        "the design needs more than {MAX_OBSERVATIONS} observations"
                    ))
                }
            };
        }
        Ok(())
    }

    /// Number of level combinations (cells): the product of level counts.
    pub fn cells(&self) -> usize {
        self.factors.iter().map(|f| f.levels.len()).product()
    }

    /// Number of observations: cells x replications.
    pub fn runs(&self) -> usize {
        self.cells() * self.replications
    }

    /// Index of the level named `level` of the factor named `factor`.
    pub fn level_index(&self, factor: &str, level: &str) -> Option<(usize, usize)> {
        let fi = self.factors.iter().position(|f| f.name == factor)?;
        let li = self.factors[fi].levels.iter().position(|l| l == level)?;
        Some((fi, li))
    }

    /// Cell number of a combination of level indices (factor 0 varies
    /// slowest), or an error naming the bad index.
    pub fn cell(&self, levels: &[usize]) -> Result<usize, ExperimentError> {
        if levels.len() != self.factors.len() {
            return Err(ExperimentError::Observation(format!(
                "{} level indices given; the design has {} factors",
                levels.len(),
                self.factors.len()
            )));
        }
        let mut c = 0;
        for (f, &l) in self.factors.iter().zip(levels) {
            if l >= f.levels.len() {
                return Err(ExperimentError::Observation(format!(
                    "level index {l} out of range for factor '{}' ({} levels)",
                    f.name,
                    f.levels.len()
                )));
            }
            c = c * f.levels.len() + l;
        }
        Ok(c)
    }

    /// Level indices of a cell number (inverse of [`Design::cell`]).
    pub fn levels_of(&self, mut cell: usize) -> Vec<usize> {
        let mut out = vec![0; self.factors.len()];
        for (i, f) in self.factors.iter().enumerate().rev() {
            out[i] = cell % f.levels.len();
            cell /= f.levels.len();
        }
        out
    }

    /// "A=a1, B=b2" for a cell, for messages.
    pub fn describe(&self, levels: &[usize]) -> String {
        self.factors
            .iter()
            .zip(levels)
            .map(|(f, &l)| format!("{}={}", f.name, f.levels[l]))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The responses of a [`Design`]: y for every cell and replication.
/// Stored cell-major (factor 0 slowest), replications innermost.
#[derive(Debug, Clone, PartialEq)]
pub struct Observations {
    design: Design,
    values: Vec<Option<f64>>,
    /// Replications filled so far per cell, for [`Observations::add`].
    filled: Vec<usize>,
}

impl Observations {
    /// Empty observations for a design (validated here).
    pub fn new(design: Design) -> Result<Observations, ExperimentError> {
        design.validate()?;
        let n = design.runs();
        let cells = design.cells();
        Ok(Observations {
            design,
            values: vec![None; n],
            filled: vec![0; cells],
        })
    }

    /// All observations at once, cell-major with replications innermost
    /// (the order of [`Observations::values`]).
    pub fn from_values(design: Design, values: &[f64]) -> Result<Observations, ExperimentError> {
        let mut o = Observations::new(design)?;
        if values.len() != o.values.len() {
            return Err(ExperimentError::Observation(format!(
                "{} observations given; the design needs {} ({} cells x {} replications)",
                values.len(),
                o.values.len(),
                o.design.cells(),
                o.design.replications
            )));
        }
        let r = o.design.replications;
        for (i, &y) in values.iter().enumerate() {
            o.set(&o.design.levels_of(i / r), i % r, y)?;
        }
        Ok(o)
    }

    pub fn design(&self) -> &Design {
        &self.design
    }

    /// Adds y as the next replication of the cell with these level indices.
    pub fn add(&mut self, levels: &[usize], y: f64) -> Result<(), ExperimentError> {
        let c = self.design.cell(levels)?;
        let r = self.design.replications;
        // Skip replications already given with set().
        while self.filled[c] < r && self.values[c * r + self.filled[c]].is_some() {
            self.filled[c] += 1;
        }
        if self.filled[c] >= r {
            return Err(ExperimentError::Observation(format!(
                "cell ({}) already has {r} replication(s); the design has {r}",
                self.design.describe(levels)
            )));
        }
        self.set(levels, self.filled[c], y)
    }

    /// Adds y as the next replication of the cell named by level names, in
    /// factor order.
    pub fn add_named(&mut self, levels: &[&str], y: f64) -> Result<(), ExperimentError> {
        if levels.len() != self.design.factors.len() {
            return Err(ExperimentError::Observation(format!(
                "{} levels given; the design has {} factors",
                levels.len(),
                self.design.factors.len()
            )));
        }
        let mut idx = Vec::with_capacity(levels.len());
        for (f, name) in self.design.factors.iter().zip(levels) {
            match f.levels.iter().position(|l| l == name) {
                Some(i) => idx.push(i),
                None => {
                    return Err(ExperimentError::Observation(format!(
                        "factor '{}' has no level '{name}'",
                        f.name
                    )))
                }
            }
        }
        self.add(&idx, y)
    }

    /// Sets replication `replication` (0-based) of a cell; y must be finite.
    pub fn set(
        &mut self,
        levels: &[usize],
        replication: usize,
        y: f64,
    ) -> Result<(), ExperimentError> {
        let c = self.design.cell(levels)?;
        let r = self.design.replications;
        if replication >= r {
            return Err(ExperimentError::Observation(format!(
                "replication {} of cell ({}) is beyond the design's {r} replication(s)",
                replication + 1,
                self.design.describe(levels)
            )));
        }
        if !y.is_finite() {
            return Err(ExperimentError::Observation(format!(
                "observation {y} for cell ({}) is not a finite number",
                self.design.describe(levels)
            )));
        }
        self.values[c * r + replication] = Some(y);
        Ok(())
    }

    /// The value of one replication of a cell, if given.
    pub fn get(&self, levels: &[usize], replication: usize) -> Option<f64> {
        let c = self.design.cell(levels).ok()?;
        if replication >= self.design.replications {
            return None;
        }
        self.values[c * self.design.replications + replication]
    }

    /// All values, cell-major with replications innermost, or an error
    /// naming the first cell with missing replications.
    pub fn values(&self) -> Result<Vec<f64>, ExperimentError> {
        let r = self.design.replications;
        let mut out = Vec::with_capacity(self.values.len());
        for (c, chunk) in self.values.chunks(r).enumerate() {
            let have = chunk.iter().filter(|v| v.is_some()).count();
            if have < r {
                return Err(ExperimentError::Observation(format!(
                    "missing observations: cell ({}) has {have} of {r} replication(s)",
                    self.design.describe(&self.design.levels_of(c))
                )));
            }
            out.extend(chunk.iter().flatten());
        }
        Ok(out)
    }
}
