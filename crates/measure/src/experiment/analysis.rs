//! Allocation of variation for a k-factor full factorial design with r
//! replications (Jain ch. 18-22, generalised).
//!
//! Model: y = mu + sum over every non-empty subset S of factors of the
//! effect of S at the levels of the observation + e. Effects of S are
//! computed from the marginal means of the cell means over the factors in S
//! minus the grand mean and the effects of every proper subset of S, so
//! they sum to zero along each of their factors. With a balanced design the
//! sums of squares are orthogonal: SST = sum of SS(S) + SSE, with
//! SS(S) = N / cells(S) * sum of effect(S)^2 and DF(S) = product of
//! (levels - 1) over S.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor, StudentsT};

use super::{Design, ExperimentError, Observations};

/// Transformation applied to every y before the analysis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transform {
    #[default]
    None,
    /// Decimal logarithm (multiplicative model, as in Jain and seed 003).
    Log10,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AnovaOptions {
    pub transform: Transform,
}

/// One row of the ANOVA table: a factor or an interaction of factors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Component {
    /// Factor names joined with " x " for interactions.
    pub name: String,
    /// Indices of the factors involved (one for a main effect).
    pub factors: Vec<usize>,
    pub sum_of_squares: f64,
    /// SS / SST * 100 (0 when SST is 0).
    pub percent_variation: f64,
    pub degrees_of_freedom: usize,
    pub mean_square: f64,
    /// MS / MSE; None without replications or when MSE is 0.
    pub f_computed: Option<f64>,
    pub f_table_90: Option<f64>,
    pub f_table_95: Option<f64>,
    pub significant_90: Option<bool>,
    pub significant_95: Option<bool>,
}

/// The experimental error row (only with replications).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorTerm {
    pub sum_of_squares: f64,
    pub percent_variation: f64,
    pub degrees_of_freedom: usize,
    pub mean_square: f64,
    /// s_e = sqrt(MSE).
    pub std_dev: f64,
}

/// One estimated effect with its confidence intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// Level names, one per factor of the group.
    pub levels: Vec<String>,
    pub value: f64,
    /// Confidence intervals (only with replications).
    pub ci_90: Option<[f64; 2]>,
    pub ci_95: Option<[f64; 2]>,
    /// Whether the interval excludes zero.
    pub significant_90: Option<bool>,
    pub significant_95: Option<bool>,
}

/// The effects of one factor or interaction, in level order (factor of
/// lowest index varies slowest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectGroup {
    pub name: String,
    pub factors: Vec<usize>,
    /// Standard deviation of each effect: s_e * sqrt(DF / N).
    pub std_dev: Option<f64>,
    pub effects: Vec<Effect>,
}

/// The analysis of a full factorial experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Anova {
    pub design: Design,
    pub transform: Transform,
    /// Number of observations N = cells x replications.
    pub observations: usize,
    /// SSY = sum of y^2 (DF N).
    pub ssy: f64,
    /// SS0 = N * mean^2 (DF 1).
    pub ss0: f64,
    /// SST = sum of (y - mean)^2 (DF N - 1).
    pub sst: f64,
    /// Grand mean mu, with its standard deviation s_e / sqrt(N).
    pub mean: Effect,
    pub mean_std_dev: Option<f64>,
    pub components: Vec<Component>,
    pub error: Option<ErrorTerm>,
    pub effects: Vec<EffectGroup>,
    /// Remarks, e.g. that the F test needs replications.
    pub notes: Vec<String>,
}

/// Analyses complete observations of a full factorial design.
pub fn anova(obs: &Observations, opts: &AnovaOptions) -> Result<Anova, ExperimentError> {
    let design = obs.design().clone();
    design.validate()?;
    let mut y = obs.values()?;
    if opts.transform == Transform::Log10 {
        let r = design.replications;
        for (i, v) in y.iter_mut().enumerate() {
            if *v <= 0.0 {
                return Err(ExperimentError::Observation(format!(
                    "observation {v} (cell {}, replication {}) is <= 0: the log transformation needs positive values",
                    design.describe(&design.levels_of(i / r)),
                    i % r + 1
                )));
            }
            *v = v.log10();
        }
    }
    Ok(analyse(design, opts.transform, &y))
}

fn quantile_f(p: f64, d1: usize, d2: usize) -> Option<f64> {
    let f = FisherSnedecor::new(d1 as f64, d2 as f64).ok()?;
    Some(f.inverse_cdf(p))
}

fn quantile_t(p: f64, dof: usize) -> Option<f64> {
    let t = StudentsT::new(0.0, 1.0, dof as f64).ok()?;
    Some(t.inverse_cdf(p))
}

/// Mixed-radix position of `cell`'s levels restricted to the factors in
/// `mask` (factor of lowest index slowest).
fn sub_index(levels: &[usize], sizes: &[usize], mask: u32) -> usize {
    let mut idx = 0;
    for (f, (&l, &n)) in levels.iter().zip(sizes).enumerate() {
        if mask & (1 << f) != 0 {
            idx = idx * n + l;
        }
    }
    idx
}

fn factors_of(mask: u32, k: usize) -> Vec<usize> {
    (0..k).filter(|f| mask & (1 << f) != 0).collect()
}

fn analyse(design: Design, transform: Transform, y: &[f64]) -> Anova {
    let k = design.factors.len();
    let r = design.replications;
    let sizes: Vec<usize> = design.factors.iter().map(|f| f.levels.len()).collect();
    let cells = design.cells();
    let n = cells * r;
    let nf = n as f64;

    let mean = y.iter().sum::<f64>() / nf;
    let ssy: f64 = y.iter().map(|v| v * v).sum();
    let ss0 = nf * mean * mean;
    let sst: f64 = y.iter().map(|v| (v - mean) * (v - mean)).sum();

    let cell_means: Vec<f64> = y
        .chunks(r)
        .map(|c| c.iter().sum::<f64>() / r as f64)
        .collect();
    let sse: f64 = y
        .chunks(r)
        .zip(&cell_means)
        .map(|(c, m)| c.iter().map(|v| (v - m) * (v - m)).sum::<f64>())
        .sum();
    let cell_levels: Vec<Vec<usize>> = (0..cells).map(|c| design.levels_of(c)).collect();

    // Subsets of factors by order (main effects first), then by bit pattern
    // of the factor indices in increasing order.
    let mut masks: Vec<u32> = (1u32..(1u32 << k)).collect();
    masks.sort_by_key(|&m| (m.count_ones(), factors_of(m, k)));

    // effects[mask] = effect values indexed by sub_index.
    let mut effects: Vec<Vec<f64>> = vec![Vec::new(); 1 << k];
    for &m in &masks {
        let len: usize = factors_of(m, k).iter().map(|&f| sizes[f]).product();
        let mut sum = vec![0.0; len];
        for (c, lv) in cell_levels.iter().enumerate() {
            sum[sub_index(lv, &sizes, m)] += cell_means[c];
        }
        let per = (cells / len) as f64;
        let mut eff: Vec<f64> = sum.iter().map(|s| s / per - mean).collect();
        // Subtract the effects of every non-empty proper subset.
        let mut levels = vec![0usize; k];
        for (i, e) in eff.iter_mut().enumerate() {
            // Decode i into the levels of the factors in m.
            let mut rest = i;
            for &f in factors_of(m, k).iter().rev() {
                levels[f] = rest % sizes[f];
                rest /= sizes[f];
            }
            let mut sub = (m - 1) & m;
            while sub != 0 {
                *e -= effects[sub as usize][sub_index(&levels, &sizes, sub)];
                sub = (sub - 1) & m;
            }
        }
        effects[m as usize] = eff;
    }

    let dfe = cells * (r - 1);
    let error = (r > 1).then(|| ErrorTerm {
        sum_of_squares: sse,
        percent_variation: pct(sse, sst),
        degrees_of_freedom: dfe,
        mean_square: sse / dfe as f64,
        std_dev: (sse / dfe as f64).sqrt(),
    });
    let mse = error.as_ref().map(|e| e.mean_square);
    let t90 = (r > 1).then(|| quantile_t(0.95, dfe)).flatten();
    let t95 = (r > 1).then(|| quantile_t(0.975, dfe)).flatten();
    let mut notes = Vec::new();
    if r == 1 {
        notes.push(
            "no replications: the F test and confidence intervals need r >= 2 (the experimental error cannot be separated from the highest-order interaction)"
                .to_string(),
        );
    } else if mse == Some(0.0) {
        notes.push("all replications are identical (SSE = 0): F is not computable".to_string());
    }

    let mut components = Vec::new();
    let mut groups = Vec::new();
    for &m in &masks {
        let fs = factors_of(m, k);
        let name = fs
            .iter()
            .map(|&f| design.factors[f].name.as_str())
            .collect::<Vec<_>>()
            .join(" x ");
        let eff = &effects[m as usize];
        let ss = nf / eff.len() as f64 * eff.iter().map(|e| e * e).sum::<f64>();
        let df: usize = fs.iter().map(|&f| sizes[f] - 1).product();
        let ms = ss / df as f64;
        let f = mse.filter(|&e| e > 0.0).map(|e| ms / e);
        let f90 = mse.and_then(|_| quantile_f(0.90, df, dfe));
        let f95 = mse.and_then(|_| quantile_f(0.95, df, dfe));
        components.push(Component {
            name: name.clone(),
            factors: fs.clone(),
            sum_of_squares: ss,
            percent_variation: pct(ss, sst),
            degrees_of_freedom: df,
            mean_square: ms,
            f_computed: f,
            f_table_90: f90,
            f_table_95: f95,
            significant_90: sig(f, f90, ms, mse),
            significant_95: sig(f, f95, ms, mse),
        });

        let sd = mse.map(|e| (e * df as f64 / nf).sqrt());
        let mut list = Vec::with_capacity(eff.len());
        for (i, &v) in eff.iter().enumerate() {
            let mut rest = i;
            let mut names = vec![String::new(); fs.len()];
            for (j, &fi) in fs.iter().enumerate().rev() {
                names[j] = design.factors[fi].levels[rest % sizes[fi]].clone();
                rest /= sizes[fi];
            }
            list.push(effect(names, v, sd, t90, t95));
        }
        groups.push(EffectGroup {
            name,
            factors: fs,
            std_dev: sd,
            effects: list,
        });
    }

    let mean_sd = mse.map(|e| (e / nf).sqrt());
    Anova {
        mean: effect(Vec::new(), mean, mean_sd, t90, t95),
        mean_std_dev: mean_sd,
        design,
        transform,
        observations: n,
        ssy,
        ss0,
        sst,
        components,
        error,
        effects: groups,
        notes,
    }
}

fn pct(ss: f64, sst: f64) -> f64 {
    if sst > 0.0 {
        ss / sst * 100.0
    } else {
        0.0
    }
}

/// Significant when F exceeds the table value; with MSE = 0 any non-zero
/// variation is significant.
fn sig(f: Option<f64>, table: Option<f64>, ms: f64, mse: Option<f64>) -> Option<bool> {
    match (f, table, mse) {
        (Some(f), Some(t), _) => Some(f > t),
        (None, _, Some(0.0)) => Some(ms > 0.0),
        _ => None,
    }
}

fn effect(
    levels: Vec<String>,
    v: f64,
    sd: Option<f64>,
    t90: Option<f64>,
    t95: Option<f64>,
) -> Effect {
    let ci = |t: Option<f64>| match (sd, t) {
        (Some(s), Some(t)) => Some([v - t * s, v + t * s]),
        _ => None,
    };
    let (ci_90, ci_95) = (ci(t90), ci(t95));
    let excl = |c: Option<[f64; 2]>| c.map(|[lo, hi]| lo > 0.0 || hi < 0.0);
    Effect {
        levels,
        value: v,
        ci_90,
        ci_95,
        significant_90: excl(ci_90),
        significant_95: excl(ci_95),
    }
}
