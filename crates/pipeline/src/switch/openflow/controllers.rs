//! The controllers of a channel as Open vSwitch serves them (issue 37):
//! each connection's role (`equal`, `master`, `slave`) and generation id,
//! its asynchronous configuration (`SET_ASYNC`, `SET_CONFIG`'s
//! `miss_send_len`), and its queue of asynchronous messages; the thread
//! that turns the datapath's packet-ins into `PACKET_IN`s for them, and
//! the table's removed rules (`send_flow_rem`) into `FLOW_REMOVED`s.
//!
//! Bounds: a connection holds at most [`ASYNC_QUEUE`] messages waiting to
//! be written; more for a peer that does not read are dropped and counted
//! (`slow_peer`), never waited for. A connection thread waits on its socket
//! and on its queue's eventfd at once, so a packet-in goes out as soon as it
//! is queued, not at the next 100 ms read timeout.

use super::wire::{port_desc, Writer, FLOW_REMOVED, NO_BUFFER, PACKET_IN, PORT_STATUS};
use crate::switch::controller::{PinBuf, PinRx};
use crate::switch::key;
use crate::switch::rule::{Match, PIN_INVALID_TTL};
use crate::switch::table::{Removed, TableHandle, RR_DELETE, RR_METER_DELETE};
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use Ordering::Relaxed;

/// Asynchronous messages a connection may have waiting to be written.
pub const ASYNC_QUEUE: usize = 256;

/// OpenFlow 1.3 roles.
pub const ROLE_NOCHANGE: u32 = 0;
pub const ROLE_EQUAL: u32 = 1;
pub const ROLE_MASTER: u32 = 2;
pub const ROLE_SLAVE: u32 = 3;

/// The default asynchronous configuration of OpenFlow 1.3 (sect. 6.1.1):
/// `[packet_in, port_status, flow_removed]` masks for master/equal, then
/// for slave. Packet-ins for table misses and actions; no `INVALID_TTL`.
pub const DEFAULT_ASYNC: [[u32; 3]; 2] = [[0b011, 0b111, 0b1111], [0, 0b111, 0]];

/// `OFP_DEFAULT_MISS_SEND_LEN`.
pub const DEFAULT_MISS_SEND_LEN: u16 = 128;

/// Counters of the controllers' side of a channel.
#[derive(Debug, Default)]
pub struct AsyncStats {
    /// Packet-ins taken from the datapath.
    pub packet_ins: AtomicU64,
    /// `PACKET_IN` messages queued for a connection (one packet-in may
    /// make several: one per controller that wants it).
    pub packet_ins_sent: AtomicU64,
    /// Packet-ins no connection wanted (none connected, all slaves, or the
    /// reason masked).
    pub packet_ins_unwanted: AtomicU64,
    /// Messages dropped for a connection whose queue was full.
    pub slow_peer: AtomicU64,
    /// `PACKET_OUT`s the datapath's queue had no room for.
    pub packet_outs_queue_full: AtomicU64,
    /// Requests refused because their connection is a slave.
    pub is_slave: AtomicU64,
    /// In fail-open now (1) or not (0), and how many times it was entered.
    pub fail_open: AtomicU64,
    pub fail_open_entered: AtomicU64,
    /// `FLOW_REMOVED` messages queued for a connection.
    pub flow_removed_sent: AtomicU64,
    /// Removed rules (with `send_flow_rem`) no connection wanted.
    pub flow_removed_unwanted: AtomicU64,
    /// Removed rules the table could not keep for the controllers (its
    /// queue of [`crate::switch::table::REMOVED_QUEUE`] was full).
    pub flow_removed_dropped: AtomicU64,
    /// `PORT_STATUS` messages queued for a connection, and link changes no
    /// connection wanted.
    pub port_status_sent: AtomicU64,
    pub port_status_unwanted: AtomicU64,
}

impl AsyncStats {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "packet_ins": self.packet_ins.load(Relaxed),
            "packet_ins_sent": self.packet_ins_sent.load(Relaxed),
            "packet_ins_unwanted": self.packet_ins_unwanted.load(Relaxed),
            "slow_peer": self.slow_peer.load(Relaxed),
            "packet_outs_queue_full": self.packet_outs_queue_full.load(Relaxed),
            "is_slave": self.is_slave.load(Relaxed),
            "fail_open": self.fail_open.load(Relaxed) == 1,
            "fail_open_entered": self.fail_open_entered.load(Relaxed),
            "flow_removed_sent": self.flow_removed_sent.load(Relaxed),
            "flow_removed_unwanted": self.flow_removed_unwanted.load(Relaxed),
            "flow_removed_dropped": self.flow_removed_dropped.load(Relaxed),
            "port_status_sent": self.port_status_sent.load(Relaxed),
            "port_status_unwanted": self.port_status_unwanted.load(Relaxed),
        })
    }
}

/// One connection as a controller.
pub struct Ctrl {
    role: AtomicU32,
    /// `[master/equal, slave][packet_in, port_status, flow_removed]`.
    masks: [[AtomicU32; 3]; 2],
    pub miss_send_len: AtomicU16,
    /// `SET_CONFIG`'s flags, as set (read back by `GET_CONFIG`).
    pub config_flags: AtomicU16,
    queue: Mutex<VecDeque<Vec<u8>>>,
    wake: OwnedFd,
    /// Something was queued since the connection last looked.
    pending: AtomicBool,
}

impl Ctrl {
    fn new() -> std::io::Result<Ctrl> {
        // SAFETY: eventfd returns a new descriptor or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Ctrl {
            role: AtomicU32::new(ROLE_EQUAL),
            masks: DEFAULT_ASYNC.map(|r| r.map(AtomicU32::new)),
            miss_send_len: AtomicU16::new(DEFAULT_MISS_SEND_LEN),
            config_flags: AtomicU16::new(0),
            queue: Mutex::new(VecDeque::new()),
            // SAFETY: fd is a new descriptor owned by nothing else.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            pending: AtomicBool::new(false),
        })
    }

    pub fn role(&self) -> u32 {
        self.role.load(Relaxed)
    }

    pub fn is_slave(&self) -> bool {
        self.role() == ROLE_SLAVE
    }

    /// The asynchronous configuration, as `GET_ASYNC_REPLY` lays it out.
    pub fn masks(&self) -> [[u32; 3]; 2] {
        std::array::from_fn(|i| std::array::from_fn(|j| self.masks[i][j].load(Relaxed)))
    }

    pub fn set_masks(&self, m: [[u32; 3]; 2]) {
        for (i, r) in m.iter().enumerate() {
            for (j, v) in r.iter().enumerate() {
                self.masks[i][j].store(*v, Relaxed);
            }
        }
    }

    /// Does this connection want a message of `kind` (0 packet-in, 1
    /// port status, 2 flow removed) for `reason`?
    fn wants(&self, kind: usize, reason: u8) -> bool {
        let i = self.is_slave() as usize;
        reason < 32 && self.masks[i][kind].load(Relaxed) & (1 << reason) != 0
    }

    /// Queue a message; false (dropped) when [`ASYNC_QUEUE`] wait already.
    fn push(&self, m: Vec<u8>) -> bool {
        {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            if q.len() >= ASYNC_QUEUE {
                return false;
            }
            q.push_back(m);
        }
        if !self.pending.swap(true, Ordering::AcqRel) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live buffer to our eventfd.
            unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
        }
        true
    }

    /// Every message waiting, in order (the eventfd is reset). The
    /// eventfd is read before the flag is taken: a message queued after
    /// the flag was taken writes the eventfd again, so none waits for the
    /// next timeout.
    pub fn take(&self) -> Vec<Vec<u8>> {
        let mut b = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live buffer (non-blocking).
        unsafe { libc::read(self.wake.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
        if !self.pending.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.drain(..).collect()
    }

    /// The descriptor that is readable while messages wait.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }
}

/// Every connection of a channel past its `HELLO`, and the master
/// election's generation id.
#[derive(Default)]
pub struct Controllers {
    conns: Mutex<Vec<Arc<Ctrl>>>,
    generation: Mutex<Option<u64>>,
    pub stats: AsyncStats,
    /// Connections up to a controller the switch connects to (`tcp:`,
    /// `ssl:`, `unix:`): what fail-open watches ([`FailOpen`]); and how
    /// many there have been (one shorter than a look of fail-open counts).
    primaries: AtomicU64,
    primaries_ever: AtomicU64,
}

/// `--fail-mode`, as Open vSwitch's: what the switch does while no
/// controller is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailMode {
    /// Only the rules (linerate's default: a switch under test forwards
    /// only what its rules say).
    #[default]
    Secure,
    /// As a learning switch (`NORMAL`): with no controller to connect to,
    /// a priority-0 `NORMAL` rule in table 0 at start; with controllers,
    /// fail-open once none has been connected for 3 inactivity probes
    /// (every frame `NORMAL`, the rules kept aside) until one connects.
    /// Open vSwitch's default.
    Standalone,
}

impl FailMode {
    pub fn parse(s: &str) -> Result<FailMode, String> {
        match s {
            "secure" => Ok(FailMode::Secure),
            "standalone" => Ok(FailMode::Standalone),
            _ => Err(format!("--fail-mode {s:?}: secure or standalone")),
        }
    }
}

/// A primary connection counted while it lives.
pub struct PrimaryUp<'a>(&'a Controllers);

impl Drop for PrimaryUp<'_> {
    fn drop(&mut self) {
        self.0.primaries.fetch_sub(1, Relaxed);
    }
}

/// Fail-open (Open vSwitch's `fail-open.c`, for [`FailMode::Standalone`]
/// with controllers to connect to): entered once no such controller has
/// been connected for `after` (3 inactivity probes, 15 s without
/// probes), left as soon as one is.
#[derive(Debug)]
pub struct FailOpen {
    after: Duration,
    last_up: std::time::Instant,
    /// [`Controllers`]' connections ever, at the last look.
    seen: u64,
    pub open: bool,
    /// Times it was entered.
    pub entered: u64,
}

impl FailOpen {
    pub fn new(probe: Option<Duration>, now: std::time::Instant) -> FailOpen {
        FailOpen {
            after: probe
                .filter(|d| !d.is_zero())
                .map_or(Duration::from_secs(15), |d| d * 3),
            last_up: now,
            seen: 0,
            open: false,
            entered: 0,
        }
    }

    /// Look at the connections at `now`: Some(state) when it changes.
    pub fn tick(&mut self, connected: bool, now: std::time::Instant) -> Option<bool> {
        if connected {
            self.last_up = now;
        }
        let want = !connected && now.duration_since(self.last_up) >= self.after;
        if want == self.open {
            return None;
        }
        self.open = want;
        self.entered += want as u64;
        Some(want)
    }
}

/// Why a role request is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum RoleError {
    /// An older generation id than one seen before.
    Stale,
    BadRole,
}

impl Controllers {
    /// A new connection (equal, the default configuration).
    pub fn join(&self) -> std::io::Result<Arc<Ctrl>> {
        let c = Arc::new(Ctrl::new()?);
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(c.clone());
        Ok(c)
    }

    pub fn leave(&self, c: &Arc<Ctrl>) {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|x| !Arc::ptr_eq(x, c));
    }

    /// `ROLE_REQUEST` (sect. 6.3.6): master and slave carry a generation
    /// id that may not go back (compared as a wrapping difference); a new
    /// master makes every other master a slave. Returns the role and the
    /// generation id for the reply.
    pub fn request_role(
        &self,
        c: &Arc<Ctrl>,
        role: u32,
        gen: u64,
    ) -> Result<(u32, u64), RoleError> {
        let mut g = self.generation.lock().unwrap_or_else(|e| e.into_inner());
        match role {
            ROLE_NOCHANGE => return Ok((c.role(), g.unwrap_or(0))),
            ROLE_EQUAL => {}
            ROLE_MASTER | ROLE_SLAVE => {
                if let Some(old) = *g {
                    if (gen.wrapping_sub(old) as i64) < 0 {
                        return Err(RoleError::Stale);
                    }
                }
                *g = Some(gen);
            }
            _ => return Err(RoleError::BadRole),
        }
        if role == ROLE_MASTER {
            for x in self.conns.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                if !Arc::ptr_eq(x, c) && x.role() == ROLE_MASTER {
                    x.role.store(ROLE_SLAVE, Relaxed);
                }
            }
        }
        c.role.store(role, Relaxed);
        Ok((role, g.unwrap_or(0)))
    }

    /// One packet-in to every connection that wants it.
    pub fn packet_in(&self, b: &PinBuf) {
        self.stats.packet_ins.fetch_add(1, Relaxed);
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let st = &self.stats;
        let (sent, unwanted) = (&st.packet_ins_sent, &st.packet_ins_unwanted);
        self.send_each(&conns, 0, b.pin.reason, || packet_in_msg(b), sent, unwanted);
    }

    /// The rules removed from `ctl` since the last call, each as a
    /// `FLOW_REMOVED` to every connection that wants its reason.
    pub fn flow_removed(&self, ctl: &TableHandle) {
        let (gone, dropped) = ctl.take_removed();
        self.stats.flow_removed_dropped.store(dropped, Relaxed);
        if gone.is_empty() {
            return;
        }
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let st = &self.stats;
        let (sent, unwanted) = (&st.flow_removed_sent, &st.flow_removed_unwanted);
        for r in &gone {
            // OpenFlow 1.3 has no METER_DELETE: Open vSwitch says DELETE.
            let reason = if r.reason == RR_METER_DELETE {
                RR_DELETE
            } else {
                r.reason
            };
            let make = || flow_removed_msg(r, reason);
            self.send_each(&conns, 2, reason, make, sent, unwanted);
        }
    }

    /// Port `no` (`uri`)'s link went up or down: a `PORT_STATUS` (reason
    /// `MODIFY`, the port's new description) to each connection that
    /// wants it.
    pub fn port_status(&self, no: u32, uri: &str, up: bool) {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let st = &self.stats;
        let make = || port_status_msg(no, uri, up);
        self.send_each(
            &conns,
            1,
            PPR_MODIFY,
            make,
            &st.port_status_sent,
            &st.port_status_unwanted,
        );
    }

    /// One asynchronous message of `kind` (0 packet-in, 1 port status, 2 flow removed)
    /// for `reason` to each of `conns` that wants it, made once; counted
    /// as `sent` per connection, `slow_peer` for a full queue, `unwanted`
    /// when no connection wants it.
    fn send_each(
        &self,
        conns: &[Arc<Ctrl>],
        kind: usize,
        reason: u8,
        make: impl FnOnce() -> Vec<u8>,
        sent: &AtomicU64,
        unwanted: &AtomicU64,
    ) {
        let mut make = Some(make);
        let mut msg: Option<Vec<u8>> = None;
        for c in conns.iter().filter(|c| c.wants(kind, reason)) {
            let m = msg.get_or_insert_with(|| make.take().map(|f| f()).unwrap_or_default());
            if c.push(m.clone()) {
                sent.fetch_add(1, Relaxed);
            } else {
                self.stats.slow_peer.fetch_add(1, Relaxed);
            }
        }
        if msg.is_none() {
            unwanted.fetch_add(1, Relaxed);
        }
    }

    /// One look of fail-open `f` at the connections; a change is made to
    /// `ctl` (the datapath's next batch sees it), said in one line and
    /// counted.
    pub fn fail_open_tick(&self, f: &mut FailOpen, ctl: &TableHandle) {
        let ever = self.primaries_ever.load(Relaxed);
        let connected = self.primary_connected() || ever != f.seen;
        f.seen = ever;
        let Some(on) = f.tick(connected, std::time::Instant::now()) else {
            return;
        };
        ctl.set_fail_open(on);
        self.stats.fail_open.store(on as u64, Relaxed);
        if on {
            self.stats.fail_open_entered.fetch_add(1, Relaxed);
            eprintln!(
                "openflow: no controller connected for {:.0} s: fail-open (--fail-mode standalone): every frame NORMAL until one connects",
                f.after.as_secs_f64()
            );
        } else {
            eprintln!("openflow: a controller connected: fail-open ends, the rules apply again");
        }
    }

    /// Count a connection to a controller the switch connects to while
    /// the guard lives; fail-open, if on, ends now (`ctl`), before the
    /// controller's first message is read, so that its rules apply from
    /// the first.
    pub fn primary_up(&self, ctl: &TableHandle) -> PrimaryUp<'_> {
        self.primaries.fetch_add(1, Relaxed);
        self.primaries_ever.fetch_add(1, Relaxed);
        ctl.set_fail_open(false);
        PrimaryUp(self)
    }

    /// Is a controller the switch connects to connected?
    pub fn primary_connected(&self) -> bool {
        self.primaries.load(Relaxed) > 0
    }

    /// Does some connection want messages of `kind` for `reason`
    /// ([`Ctrl`]'s masks)?
    pub fn wanted(&self, kind: usize, reason: u8) -> bool {
        let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.iter().any(|c| c.wants(kind, reason))
    }

    /// How many connections there are (tests).
    pub fn len(&self) -> usize {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `OFPPR_MODIFY`: a port's state changed.
pub const PPR_MODIFY: u8 = 2;

/// An OpenFlow 1.3 `PORT_STATUS` (xid 0): the reason and the port.
pub fn port_status_msg(no: u32, uri: &str, up: bool) -> Vec<u8> {
    let mut w = Writer::new(PORT_STATUS, 0);
    w.u8(PPR_MODIFY);
    w.zeros(7);
    w.bytes(&port_desc(no, uri, up));
    w.finish()
}

/// An OpenFlow 1.3 `PACKET_IN` (xid 0, no buffer). Its match carries what
/// Open vSwitch's carries for a packet of a physical port: `in_port`, and
/// `metadata`, the tunnel id and the registers that are not zero (the pipeline's state
/// at the `controller` action).
pub fn packet_in_msg(b: &PinBuf) -> Vec<u8> {
    let mut w = Writer::new(PACKET_IN, 0);
    w.u32(NO_BUFFER);
    w.u16(b.total_len);
    w.u8(b.pin.reason);
    w.u8(b.pin.table);
    w.u64(b.pin.cookie);
    let mut m = Match::ANY;
    let mut exact = |f: key::FieldLoc, v: u64| {
        if v != 0 || f == key::IN_PORT {
            m.mask.set(f, f.full());
            m.value.set(f, v);
        }
    };
    exact(key::IN_PORT, b.in_port as u64);
    exact(key::METADATA, b.pipe.metadata);
    exact(key::TUN_ID, b.pipe.tun_id);
    for (i, r) in b.pipe.regs.iter().enumerate() {
        exact(key::reg(i), *r as u64);
    }
    super::oxm::encode_match(&m, &mut w);
    w.zeros(2);
    w.bytes(b.bytes());
    w.finish()
}

/// An OpenFlow 1.3 `FLOW_REMOVED` (xid 0) for `r`, with `reason`.
pub fn flow_removed_msg(r: &Removed, reason: u8) -> Vec<u8> {
    let mut w = Writer::new(FLOW_REMOVED, 0);
    w.u64(r.rule.cookie);
    w.u16(r.rule.priority);
    w.u8(reason);
    w.u8(r.rule.table);
    w.u32((r.duration_ns / 1_000_000_000) as u32);
    w.u32((r.duration_ns % 1_000_000_000) as u32);
    w.u16(r.rule.idle_timeout);
    w.u16(r.rule.hard_timeout);
    w.u64(r.packets);
    w.u64(r.bytes);
    super::oxm::encode_match(&r.rule.m, &mut w);
    w.finish()
}

/// How often the asynchronous thread looks for removed rules and at who
/// asks for `INVALID_TTL` packet-ins (the tick
/// expires rules once a second; a `FLOW_MOD` delete reports its own at
/// once).
const REMOVED_EVERY: Duration = Duration::from_millis(100);

/// The thread that serves the controllers their asynchronous messages:
/// the datapath's packet-ins (every buffer goes back to the datapath at
/// once) and, every [`REMOVED_EVERY`], the rules removed from `ctl`; and
/// that enters and leaves fail-open (`fail`: standalone with controllers
/// to connect to). Ends
/// at `stop` (set once the datapath has ended), after the packet-ins still
/// queued, so that each one the datapath let through is counted here.
pub fn async_loop(
    rx: PinRx,
    ctrls: Arc<Controllers>,
    ctl: Arc<TableHandle>,
    ttl_wanted: Arc<AtomicBool>,
    mut fail: Option<FailOpen>,
    stop: Arc<AtomicBool>,
) {
    use std::sync::mpsc::RecvTimeoutError;
    let serve = |b: Box<PinBuf>| {
        ctrls.packet_in(&b);
        rx.give_back(b);
    };
    let mut looked = std::time::Instant::now();
    while !stop.load(Ordering::SeqCst) {
        match rx.full.recv_timeout(REMOVED_EVERY) {
            Ok(b) => serve(b),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if looked.elapsed() >= REMOVED_EVERY {
            ctrls.flow_removed(&ctl);
            ttl_wanted.store(ctrls.wanted(0, PIN_INVALID_TTL), Relaxed);
            if let Some(f) = fail.as_mut() {
                ctrls.fail_open_tick(f, &ctl);
            }
            looked = std::time::Instant::now();
        }
    }
    while let Ok(b) = rx.full.try_recv() {
        serve(b);
    }
    ctrls.flow_removed(&ctl);
}

/// Wait up to `ms` for `sock` or `wake` to be readable: (sock, wake).
pub fn poll_two(sock: RawFd, wake: RawFd, ms: i32) -> (bool, bool) {
    let mut p = [
        libc::pollfd {
            fd: sock,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // SAFETY: two valid pollfds.
    let n = unsafe { libc::poll(p.as_mut_ptr(), 2, ms) };
    if n <= 0 {
        return (false, false);
    }
    (p[0].revents != 0, p[1].revents != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::switch::rule::{Pin, PIN_ACTION, PIN_INVALID_TTL, PIN_NO_MATCH};

    fn buf(reason: u8) -> Box<PinBuf> {
        let mut b = Box::new(PinBuf {
            pin: Pin::new(0xffff),
            in_port: 7,
            pipe: Default::default(),
            total_len: 3,
            len: 3,
            data: [0; crate::switch::controller::PIN_DATA],
        });
        b.pin.reason = reason;
        b.pin.cookie = 0xabc;
        b.data[..3].copy_from_slice(&[1, 2, 3]);
        b
    }

    #[test]
    fn a_new_master_makes_the_old_one_a_slave_and_stale_ids_are_refused() {
        let cs = Controllers::default();
        let (a, b) = (cs.join().unwrap(), cs.join().unwrap());
        assert_eq!(cs.request_role(&a, ROLE_MASTER, 5), Ok((ROLE_MASTER, 5)));
        assert_eq!(cs.request_role(&b, ROLE_MASTER, 6), Ok((ROLE_MASTER, 6)));
        assert_eq!((a.role(), b.role()), (ROLE_SLAVE, ROLE_MASTER));
        assert_eq!(cs.request_role(&a, ROLE_MASTER, 4), Err(RoleError::Stale));
        assert_eq!(cs.request_role(&a, ROLE_NOCHANGE, 0), Ok((ROLE_SLAVE, 6)));
        assert_eq!(cs.request_role(&a, 9, 0), Err(RoleError::BadRole));
        // Wrapping: 0 after u64::MAX is newer.
        let cs = Controllers::default();
        let a = cs.join().unwrap();
        assert!(cs.request_role(&a, ROLE_SLAVE, u64::MAX).is_ok());
        assert!(cs.request_role(&a, ROLE_MASTER, 0).is_ok());
    }

    #[test]
    fn packet_ins_go_to_those_that_want_them_and_a_full_queue_counts() {
        let cs = Controllers::default();
        let (m, s) = (cs.join().unwrap(), cs.join().unwrap());
        cs.request_role(&m, ROLE_MASTER, 1).unwrap();
        cs.request_role(&s, ROLE_SLAVE, 1).unwrap();
        cs.packet_in(&buf(PIN_NO_MATCH));
        let got = m.take();
        assert_eq!(got.len(), 1);
        assert!(s.take().is_empty(), "a slave gets no packet-ins");
        let msg = &got[0];
        assert_eq!((msg[0], msg[1]), (4, PACKET_IN));
        assert_eq!(&msg[8..12], &NO_BUFFER.to_be_bytes());
        assert_eq!(msg[14], PIN_NO_MATCH);
        assert_eq!(&msg[16..24], &0xabcu64.to_be_bytes());
        assert_eq!(&msg[28..32], &0x8000_0004u32.to_be_bytes());
        assert_eq!(&msg[32..36], &7u32.to_be_bytes());
        assert_eq!(&msg[42..], &[1, 2, 3]);
        // INVALID_TTL is off by default; turned on, it comes.
        cs.packet_in(&buf(PIN_INVALID_TTL));
        assert!(m.take().is_empty());
        assert_eq!(cs.stats.packet_ins_unwanted.load(Relaxed), 1);
        let mut k = m.masks();
        k[0][0] |= 1 << PIN_INVALID_TTL;
        m.set_masks(k);
        cs.packet_in(&buf(PIN_INVALID_TTL));
        assert_eq!(m.take().len(), 1);
        for _ in 0..ASYNC_QUEUE + 5 {
            cs.packet_in(&buf(PIN_ACTION));
        }
        assert_eq!(cs.stats.slow_peer.load(Relaxed), 5);
        assert_eq!(m.take().len(), ASYNC_QUEUE);
        cs.leave(&m);
        cs.leave(&s);
        assert!(cs.is_empty());
    }

    #[test]
    fn fail_open_enters_after_three_probes_without_a_controller_and_leaves_when_one_connects() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut f = FailOpen::new(Some(Duration::from_secs(1)), t0);
        assert_eq!(f.tick(false, at(2_900)), None, "not before 3 probes");
        assert_eq!(f.tick(false, at(3_000)), Some(true));
        assert_eq!(f.tick(false, at(9_000)), None, "entered once");
        assert_eq!(f.tick(true, at(9_100)), Some(false), "left on connect");
        assert_eq!(
            f.tick(false, at(11_000)),
            None,
            "counts from the last connection"
        );
        assert_eq!(f.tick(false, at(12_100)), Some(true));
        assert_eq!(f.entered, 2);
        // Without probes: 15 s.
        let mut f = FailOpen::new(None, t0);
        assert_eq!(f.tick(false, at(14_999)), None);
        assert_eq!(f.tick(false, at(15_000)), Some(true));
        // The connection count behind `primary_connected`.
        // A connection ends fail-open at once; one shorter than a look
        // still counts as connected at the next look.
        let cs = Controllers::default();
        let ctl = TableHandle::new(crate::switch::FlowTable::new());
        let mut f = FailOpen::new(Some(Duration::from_millis(1)), t0);
        std::thread::sleep(Duration::from_millis(5));
        cs.fail_open_tick(&mut f, &ctl);
        assert!(ctl.current().fail_open() && f.open);
        assert!(!cs.primary_connected());
        let up = cs.primary_up(&ctl);
        assert!(cs.primary_connected());
        assert!(!ctl.current().fail_open(), "ended at the connection");
        drop(up);
        assert!(!cs.primary_connected());
        cs.fail_open_tick(&mut f, &ctl);
        assert!(!f.open, "the short connection was seen");
        assert_eq!(cs.stats.fail_open.load(Relaxed), 0);
        assert_eq!(FailMode::parse("standalone"), Ok(FailMode::Standalone));
        assert_eq!(FailMode::parse("secure"), Ok(FailMode::Secure));
        assert!(FailMode::parse("open").is_err());
    }

    #[test]
    fn the_wake_fd_is_readable_while_messages_wait() {
        let cs = Controllers::default();
        let c = cs.join().unwrap();
        let (r, _) = poll_two(c.wake_fd(), c.wake_fd(), 0);
        assert!(!r);
        cs.packet_in(&buf(PIN_ACTION));
        let (r, _) = poll_two(c.wake_fd(), c.wake_fd(), 0);
        assert!(r);
        assert_eq!(c.take().len(), 1);
        let (r, _) = poll_two(c.wake_fd(), c.wake_fd(), 0);
        assert!(!r, "reset once taken");
    }
}
