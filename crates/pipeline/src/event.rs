//! What a running pipeline tells whoever runs it (the CLI prints it): the
//! ports it opened, a tick once a second, and at the end its account, each
//! as JSON or as a line of text.

/// An event of a running pipeline; `T` is its once-a-second tick.
pub enum Event<'a, T> {
    /// A port (or socket) is open, or a port's link changed: one line
    /// saying what it is.
    Opened(String),
    /// Once a second.
    Tick(&'a T),
}

/// Something a pipeline reports, in the two forms the CLI prints.
pub trait Report {
    fn json(&self) -> serde_json::Value;
    fn text(&self) -> String;
}

/// A run's final account.
pub trait Account: Report {
    /// The error that ended the run (a port that failed), if one did.
    fn error(&self) -> Option<&str>;
    /// Whether received = passed + drops holds at every stage.
    fn balanced(&self) -> bool;
}
