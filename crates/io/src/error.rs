//! The error every port, ring and program of io reports: one line saying
//! what, which port and why. At the bottom of io: everything may use it.

/// One-line error about a port (what, which port, why).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortError(pub String);

impl PortError {
    pub fn new(msg: impl Into<String>) -> PortError {
        PortError(msg.into())
    }
    /// Wrap an OS error with what was being done.
    pub fn os(what: impl std::fmt::Display, e: std::io::Error) -> PortError {
        PortError(format!("{what}: {e}"))
    }
}

impl std::fmt::Display for PortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for PortError {}
