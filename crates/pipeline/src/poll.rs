//! How a pipeline's loop waits when its ports are idle: one choice for
//! every pipeline (the forwarder, the switch).

/// How the loop waits when idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polling {
    /// Spin on the rings (lowest latency, one core at 100 %).
    Busy,
    /// Sleep in poll() when idle (need_wakeup mode).
    Wait,
}

impl Polling {
    /// "busy" or anything else ("wait"), as the commands' `--poll` says it.
    pub fn from_name(s: &str) -> Polling {
        if s == "busy" {
            Polling::Busy
        } else {
            Polling::Wait
        }
    }
}
