//! The OpenFlow 1.3 channel of `linerate switch --openflow` (issue 22):
//! what `ovs-ofctl -O OpenFlow13` and OpenFlow controllers say to a switch,
//! and the switch's answers.
//!
//! - [`wire`]: the message framing, a bounded reader (every read is
//!   checked: malformed input is an [`wire::OfError`], never a panic) and
//!   the protocol's numbers;
//! - [`oxm`]: matches (OXM, and the Nicira NXM fields `ovs-ofctl` sends:
//!   registers, `vlan_tci`, `nw_ttl`, `tcp_flags`) to and from [`Match`];
//! - [`instr`]: instructions and actions (standard, and the Nicira
//!   `resubmit`, `load`, `move`, `output:REG`, `learn`) to and from
//!   [`Action`]s;
//! - [`msg`]: requests decoded, replies built, the table's changes applied
//!   (`FLOW_MOD`, `GROUP_MOD`, `METER_MOD`, the multipart statistics);
//! - [`client`]: the controller side, for the insertion benchmark and
//!   the tests;
//! - [`endpoint`]: where the channel listens or connects, in Open
//!   vSwitch's syntax (`punix:`, `pssl:`, `ptcp:`, `unix:`, `ssl:`, `tcp:`);
//! - [`transport`]: the byte streams a connection runs over (TCP, Unix,
//!   mutual TLS with rustls) and the TLS files;
//! - [`channel`]: the listener or the active connection, one thread per
//!   connection, its slots, reconnection and rate-limited log;
//! - [`conn`]: one connection's framing loop, its `HELLO` deadline and
//!   inactivity probe;
//! - [`controllers`]: the connections as controllers (roles, asynchronous
//!   configuration, their `PACKET_IN`s).
//!
//! Decoding goes through the rule syntax: a `FLOW_MOD` becomes the text
//! `ovs-ofctl` would print for it, parsed by [`Rule::parse`], so a rule
//! added over OpenFlow is checked exactly as one from a rules file or
//! `switch-ctl` (prerequisites, field widths, tables), and `dump-flows`
//! over either channel lists the same rules. The per-packet path never
//! sees any of this: the channel edits the table through [`TableHandle`] like
//! `switch-ctl` does.
//!
//! [`Match`]: super::Match
//! [`Action`]: super::Action
//! [`Rule::parse`]: super::Rule::parse
//! [`TableHandle`]: super::TableHandle

pub mod channel;
pub mod client;
pub mod conn;
pub mod controllers;
pub mod endpoint;
pub mod instr;
pub mod msg;
pub mod oxm;
pub mod slots;
pub mod transport;
pub mod wire;

#[cfg(test)]
mod tests;

pub use channel::{Channel, Config};
pub use endpoint::Endpoint;
pub use transport::TlsFiles;

/// Arbitrary bytes as a stream of OpenFlow messages to a switch: no panic
/// (the fuzz target of the OpenFlow parser).
pub fn fuzz(data: &[u8]) {
    msg::fuzz(data)
}

/// Arbitrary bytes as what a peer sends over the channel's real framing
/// loop (see [`conn::fuzz_channel`]).
pub fn fuzz_channel(data: &[u8]) {
    conn::fuzz_channel(data)
}

/// Arbitrary bytes as a switch's replies to the client (see
/// [`client::fuzz_client`]).
pub fn fuzz_client(data: &[u8]) {
    client::fuzz_client(data)
}

/// Arbitrary bytes as an `--openflow` value (see
/// [`endpoint::fuzz_endpoint`]).
pub fn fuzz_endpoint(data: &[u8]) {
    endpoint::fuzz_endpoint(data)
}
