//! The OpenFlow client of `linerate bench switch --parts openflow`:
//! linerate's own (`linerate_pipeline::switch::openflow::client`), the same
//! for linerate and Open vSwitch, given to the study here (linerate-measure
//! drives the pipelines from beside and does not link them).

use linerate_measure::study::switch::openflow::{Controller, Dialer, Refused};
use linerate_pipeline::switch::openflow::client::Client;
use linerate_pipeline::switch::Rule;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The parsed rules, shared by the connections.
struct Rules(Arc<Vec<Rule>>);

struct Connection {
    c: Client,
    rules: Arc<Vec<Rule>>,
}

/// Parse every rule once (before anything is timed).
pub fn prepare(lines: &[String]) -> Result<Box<dyn Dialer>, String> {
    let rules = lines
        .iter()
        .map(|l| Rule::parse(l).map_err(|e| format!("rule '{l}': {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Box::new(Rules(Arc::new(rules))))
}

impl Dialer for Rules {
    fn connect(&self, addr: SocketAddr, timeout: Duration) -> Result<Box<dyn Controller>, String> {
        Ok(Box::new(Connection {
            c: Client::connect(addr, timeout)?,
            rules: self.0.clone(),
        }))
    }
}

impl Controller for Connection {
    fn delete_all(&mut self) -> Result<(), String> {
        self.c.delete_all()
    }

    fn add(&mut self, i: usize) -> Result<(), String> {
        let r = self
            .rules
            .get(i)
            .ok_or_else(|| format!("openflow: no rule {i} of {}", self.rules.len()))?;
        self.c.add(r).map(|_| ())
    }

    fn barrier(&mut self) -> Result<Vec<Refused>, String> {
        self.c.barrier()
    }

    fn count(&mut self, cookie: u64) -> Result<u32, String> {
        self.c.aggregate(cookie).map(|(_, _, n)| n)
    }
}
