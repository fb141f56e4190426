//! Where a study's results go: the options every study shares.

use std::path::PathBuf;

/// Where a study's results go.
#[derive(clap::Args)]
pub struct Out {
    /// Write every run as JSON here ("-": standard output, the table then goes to stderr).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write the HTML page with the plots here [default: linerate-STUDY.html].
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Put the study's Markdown section into this file, between <!-- STUDY --> markers
    /// (replaced in place, or appended).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}
