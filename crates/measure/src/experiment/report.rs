//! Text and JSON output of an [`Anova`].

use std::fmt::{self, Write};

use super::{Anova, Transform};

/// A number for the tables: 4 decimals for ordinary magnitudes, 4
/// significant digits in scientific notation for very small or large ones.
fn num(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0".into()
    } else if (1e-3..1e12).contains(&a) {
        format!("{v:.4}")
    } else {
        format!("{v:.3e}")
    }
}

fn opt(v: Option<f64>) -> String {
    v.map(num).unwrap_or_default()
}

fn yes_no(s90: Option<bool>, s95: Option<bool>) -> String {
    match (s90, s95) {
        (_, Some(true)) => "95%".into(),
        (Some(true), _) => "90%".into(),
        (Some(false), _) => "no".into(),
        _ => String::new(),
    }
}

/// Lays out rows with columns padded to their widest cell: the first
/// column left-aligned, the others right-aligned.
fn layout(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut w = vec![0; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i == 0 {
                let _ = write!(line, "{c:<width$}", width = w[0]);
            } else {
                let _ = write!(line, "  {c:>width$}", width = w[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

impl Anova {
    /// The ANOVA table in the layout of Jain's tables (seed 003 Tables 3
    /// and 5): y, y.., y - y.., one row per factor and interaction, Errors.
    pub fn table(&self) -> String {
        let s = |x: &str| x.to_string();
        let mut rows = vec![vec![
            s("Component"),
            s("Sum of Squares"),
            s("% Variation"),
            s("DF"),
            s("Mean Square"),
            s("F-Comp"),
            s("F-Table(90%)"),
            s("F-Table(95%)"),
            s("Significant"),
        ]];
        let n = self.observations;
        rows.push(vec![s("y"), num(self.ssy), s(""), n.to_string()]);
        rows.push(vec![s("y.."), num(self.ss0), s(""), s("1")]);
        rows.push(vec![
            s("y - y.."),
            num(self.sst),
            format!("{:.2}%", 100.0),
            (n - 1).to_string(),
        ]);
        for c in &self.components {
            rows.push(vec![
                c.name.clone(),
                num(c.sum_of_squares),
                format!("{:.2}%", c.percent_variation),
                c.degrees_of_freedom.to_string(),
                num(c.mean_square),
                opt(c.f_computed),
                opt(c.f_table_90),
                opt(c.f_table_95),
                yes_no(c.significant_90, c.significant_95),
            ]);
        }
        if let Some(e) = &self.error {
            rows.push(vec![
                s("Errors"),
                num(e.sum_of_squares),
                format!("{:.2}%", e.percent_variation),
                e.degrees_of_freedom.to_string(),
                num(e.mean_square),
            ]);
        }
        let mut out = String::new();
        if self.transform == Transform::Log10 {
            out.push_str("Response: log10(y)\n");
        }
        out.push_str(&layout(&rows));
        if let Some(e) = &self.error {
            let _ = writeln!(out, "s_e = sqrt(MSE) = {}", num(e.std_dev));
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        out
    }

    /// The effects with their 90 % and 95 % confidence intervals.
    pub fn effects_table(&self) -> String {
        let s = |x: &str| x.to_string();
        let ci = |c: Option<[f64; 2]>| {
            c.map(|[lo, hi]| format!("({}, {})", num(lo), num(hi)))
                .unwrap_or_default()
        };
        let mut rows = vec![vec![
            s("Effect"),
            s("Value"),
            s("Std Dev"),
            s("90% CI"),
            s("95% CI"),
            s("Significant"),
        ]];
        rows.push(vec![
            s("mean"),
            num(self.mean.value),
            opt(self.mean_std_dev),
            ci(self.mean.ci_90),
            ci(self.mean.ci_95),
            yes_no(self.mean.significant_90, self.mean.significant_95),
        ]);
        for g in &self.effects {
            for e in &g.effects {
                let label = g
                    .factors
                    .iter()
                    .zip(&e.levels)
                    .map(|(&f, l)| format!("{}={l}", self.design.factors[f].name))
                    .collect::<Vec<_>>()
                    .join(", ");
                rows.push(vec![
                    label,
                    num(e.value),
                    opt(g.std_dev),
                    ci(e.ci_90),
                    ci(e.ci_95),
                    yes_no(e.significant_90, e.significant_95),
                ]);
            }
        }
        layout(&rows)
    }

    /// The whole analysis as pretty JSON (non-finite numbers never occur:
    /// F is null where it is not computable).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

impl fmt::Display for Anova {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.table())?;
        f.write_str("\n")?;
        f.write_str(&self.effects_table())
    }
}
