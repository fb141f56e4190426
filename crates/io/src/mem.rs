//! The `mem` port backend: in-process ports for pure-CPU measurement and tests.
//!
//! - `mem:NAME`: one end of a named in-process link. The first open of NAME
//!   gets end 0, the second end 1, a third open is an error while the link
//!   lives. What one end sends the other receives. Each direction is a
//!   lock-free single-producer single-consumer ring of frame descriptors
//!   plus a return ring that brings frames back to the sender's pool.
//! - `mem:NAME?source=SIZE` (or `gen=SIZE`): an endless source of valid
//!   Ethernet/IPv4/UDP frames of SIZE bytes (a fixed set of pre-built frames
//!   handed out in turn, no copy per packet, the job of DPDK's `net_null`);
//!   its TX counts and discards.
//!   `&flows=N` (1..=16777216) makes every packet one of N flows drawn at
//!   random: the source then writes the drawn flow's IPv4 source address
//!   (10.F2.F1.F0, the flow number's bytes) and UDP source port into the
//!   frame it hands out, with a fresh IPv4 checksum and no UDP checksum
//!   (zero, valid for IPv4). A handed-out frame is rewritten when it comes
//!   round again, [`SOURCE_FRAMES`] packets later. Without `flows` the
//!   pre-built frames are handed out unchanged (256 flows).
//! - `mem:NAME?sink`: TX counts and discards, RX gives nothing (`at_end`).
//!
//! Source and sink use no atomics at all; a link uses one acquire load and
//! one release store per ring per batch.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::batch::{Batch, Pkt, PortId, MAX_BATCH};
use crate::counters::KernelStats;
use crate::pool::{FreeStack, Region};
use crate::port::{OpenOptions, Port, PortError, PortInfo, RxPort, TxPort};
use crate::uri::Uri;

/// Open a `mem:` port (see the module docs).
pub fn open(uri: &Uri, opts: &OpenOptions) -> Result<Port, PortError> {
    uri.check_known(&["source", "gen", "sink", "flows"])?;
    let source = match (uri.get("source"), uri.get("gen")) {
        (Some(_), Some(_)) => return Err(uri.err("give either 'source' or 'gen', not both")),
        (Some(_), None) => Some(uri.get_or("source", 0usize)?),
        (None, Some(_)) => Some(uri.get_or("gen", 0usize)?),
        (None, None) => None,
    };
    let sink = uri.get_bool("sink", false)?;
    if sink && source.is_some() {
        return Err(uri.err("a port is either a source or a sink, not both"));
    }
    if let Some(size) = source {
        return open_source(uri, opts, size);
    }
    if uri.get("flows").is_some() {
        return Err(uri.err("'flows' is a parameter of a source (source=SIZE)"));
    }
    if sink {
        return Ok(Port {
            info: PortInfo {
                uri: uri.text.clone(),
                kind: "mem",
                detail: "sink: TX counts and discards, RX gives nothing".into(),
                clock: "none",
                ifindex: None,
                ifname: None,
            },
            rx: Box::new(crate::port::NoRx::new()),
            tx: Box::new(DiscardTx::new(opts.frame_size as usize, "sink")),
        });
    }
    open_link(uri, opts)
}

// ---------------------------------------------------------------------------
// Source and sink.

/// Smallest source frame: Ethernet + IPv4 + UDP headers.
pub const MIN_SOURCE_SIZE: usize = 14 + 20 + 8;
/// Number of distinct pre-built frames of a source (one batch never holds
/// the same frame twice).
pub const SOURCE_FRAMES: usize = MAX_BATCH;
/// Largest `flows=N` of a source (distinct IPv4 source addresses 10.x.y.z).
pub const MAX_SOURCE_FLOWS: u32 = 1 << 24;

fn open_source(uri: &Uri, opts: &OpenOptions, size: usize) -> Result<Port, PortError> {
    let max = opts.frame_size as usize;
    if size < MIN_SOURCE_SIZE || size > max {
        return Err(uri.err(format!(
            "source frame size {size} out of range {MIN_SOURCE_SIZE}..={max} (the frame size)"
        )));
    }
    let flows: u32 = uri.get_or("flows", 0u32)?;
    if uri.get("flows").is_some() && !(1..=MAX_SOURCE_FLOWS).contains(&flows) {
        return Err(uri.err(format!("flows={flows} out of range 1..={MAX_SOURCE_FLOWS}")));
    }
    let mut rx =
        SourceRx::new(size).map_err(|e| uri.err(format!("cannot map source frames: {e}")))?;
    rx.flows = flows;
    let what = if flows > 0 {
        format!("{flows} flows drawn at random")
    } else {
        format!("{SOURCE_FRAMES} flows")
    };
    Ok(Port {
        info: PortInfo {
            uri: uri.text.clone(),
            kind: "mem",
            detail: format!(
                "source: {SOURCE_FRAMES} pre-built Ethernet/IPv4/UDP frames of {size} bytes ({what}), TX discards"
            ),
            clock: "none",
            ifindex: None,
            ifname: None,
        },
        rx: Box::new(rx),
        tx: Box::new(DiscardTx::new(opts.frame_size as usize, "source")),
    })
}

/// Write a valid Ethernet/IPv4/UDP frame of `buf.len()` bytes (at least
/// [`MIN_SOURCE_SIZE`]); `flow` varies the IPv4 source address and the UDP
/// source port so that the frames spread over flows.
pub fn build_udp_frame(buf: &mut [u8], flow: u16) {
    let size = buf.len();
    assert!(
        size >= MIN_SOURCE_SIZE,
        "frame too small for Ethernet/IPv4/UDP"
    );
    // Ethernet: locally administered unicast addresses.
    buf[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    buf[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    // IPv4 (the IP length is capped at 65535 if someone asks for a giant frame).
    let ip_len = (size - 14).min(65535) as u16;
    let ip = &mut buf[14..34];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&flow.to_be_bytes()); // identification
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    ip[8] = 64;
    ip[9] = 17;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&[10, 0, (flow >> 8) as u8, flow as u8]);
    ip[16..20].copy_from_slice(&[10, 1, 0, 1]);
    let c = ipv4_checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    // UDP.
    let udp_len = ip_len - 20;
    let sport = 1024u16.wrapping_add(flow);
    buf[34..36].copy_from_slice(&sport.to_be_bytes());
    buf[36..38].copy_from_slice(&9u16.to_be_bytes()); // discard
    buf[38..40].copy_from_slice(&udp_len.to_be_bytes());
    buf[40..42].copy_from_slice(&[0, 0]);
    for (i, b) in buf[42..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7).wrapping_add(flow as u8);
    }
    // UDP checksum over the pseudo-header and the datagram.
    let end = (14 + ip_len as usize).min(size);
    let mut sum: u32 = 0;
    for w in [&buf[26..30], &buf[30..34]] {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32 + u16::from_be_bytes([w[2], w[3]]) as u32;
    }
    sum += 17 + udp_len as u32;
    sum = ones_sum(sum, &buf[34..end]);
    let mut c = !fold(sum);
    if c == 0 {
        c = 0xffff;
    }
    buf[40..42].copy_from_slice(&c.to_be_bytes());
}

fn ones_sum(mut sum: u32, data: &[u8]) -> u32 {
    let mut it = data.chunks_exact(2);
    for w in &mut it {
        sum = sum.wrapping_add(u16::from_be_bytes([w[0], w[1]]) as u32);
        if sum > 0xffff_0000 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
    }
    if let [last] = it.remainder() {
        sum = sum.wrapping_add((*last as u32) << 8);
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The IPv4 header checksum of `hdr` (checksum field must be zero or is included).
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    !fold(ones_sum(0, hdr))
}

/// RX of a source: hands out the pre-built frames in turn.
struct SourceRx {
    id: PortId,
    /// The frames; also held by every batch this source fills.
    region: Arc<Region>,
    size: u32,
    stride: u64,
    next: usize,
    pkts: u64,
    /// Frames handed out and not yet released: the source has exactly one
    /// batch of frames, so it hands out more only once all are back (a
    /// consumer holding a batch while it asks for another gets nothing
    /// rather than a second descriptor of a frame it still has).
    out: usize,
    /// 0: hand out the pre-built frames; N: rewrite each to one of N flows.
    flows: u32,
    rng: u64,
}

impl SourceRx {
    fn new(size: usize) -> std::io::Result<SourceRx> {
        let stride = size.div_ceil(64) * 64;
        let region = Region::new(SOURCE_FRAMES as u32, stride.max(64) as u32)?;
        for i in 0..SOURCE_FRAMES {
            // SAFETY: frame i lies inside the region (SOURCE_FRAMES frames of `stride` bytes).
            let f = unsafe { std::slice::from_raw_parts_mut(region.at((i * stride) as u64), size) };
            build_udp_frame(f, i as u16);
        }
        Ok(SourceRx {
            id: PortId::fresh(),
            region: Arc::new(region),
            size: size as u32,
            stride: stride as u64,
            next: 0,
            pkts: 0,
            out: 0,
            flows: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
        })
    }

    /// Make `f` (an Ethernet/IPv4/UDP frame of this source) one of the
    /// `flows` flows, drawn at random. A few stores and a 20-byte checksum:
    /// the work a NIC's DMA would have done, counted in the rx stage.
    #[inline]
    fn rewrite_flow(&mut self, f: &mut [u8]) {
        // xorshift64*: cheap, and uniform enough for a cache benchmark.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        let r = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32;
        // Lemire's multiply-shift range reduction: uniform in 0..flows.
        let flow = ((r as u64 * self.flows as u64) >> 32) as u32;
        f[26..30].copy_from_slice(&[10, (flow >> 16) as u8, (flow >> 8) as u8, flow as u8]);
        f[24..26].copy_from_slice(&[0, 0]);
        let c = ipv4_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let sport = 1024u16.wrapping_add((flow & 0x3fff) as u16);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[40..42].copy_from_slice(&[0, 0]);
    }
}

impl RxPort for SourceRx {
    #[inline]
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        batch.claim(self.id)?;
        if self.out > 0 {
            return Ok(0);
        }
        let n = batch.room();
        self.out = n;
        batch.hold(&self.region);
        let mut idx = self.next;
        for _ in 0..n {
            let addr = idx as u64 * self.stride;
            // SAFETY: idx < SOURCE_FRAMES, so addr is inside the region.
            let data = unsafe { self.region.at(addr) };
            if self.flows > 0 {
                // SAFETY: the frame is ours again: every frame handed out
                // was released before this recv (`out`), and it is `size`
                // bytes inside the region.
                let f = unsafe { std::slice::from_raw_parts_mut(data, self.size as usize) };
                self.rewrite_flow(f);
            }
            // SAFETY: the frame is `size` bytes inside the region, held by
            // the batch; the source writes it again only in a recv after
            // every frame came back (`out`).
            batch.push(unsafe { Pkt::from_raw(data, self.size, addr, 0) });
            idx = (idx + 1) % SOURCE_FRAMES;
        }
        self.next = idx;
        self.pkts += n as u64;
        Ok(n)
    }
    #[inline]
    fn release(&mut self, batch: &mut Batch) -> Result<(), PortError> {
        // Every frame of a batch this source filled is its own.
        batch.check_owner(self.id)?;
        self.out = self.out.saturating_sub(batch.len());
        batch.clear();
        Ok(())
    }
    fn kernel_stats(&self) -> KernelStats {
        KernelStats {
            counters: vec![("source_packets", self.pkts)],
        }
    }
}

/// TX that counts and discards.
struct DiscardTx {
    max_frame: usize,
    what: &'static str,
    pkts: u64,
    bytes: u64,
}

impl DiscardTx {
    fn new(max_frame: usize, what: &'static str) -> DiscardTx {
        DiscardTx {
            max_frame,
            what,
            pkts: 0,
            bytes: 0,
        }
    }
}

impl TxPort for DiscardTx {
    #[inline]
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        self.pkts += pkts.len() as u64;
        self.bytes += pkts.iter().map(|p| p.len() as u64).sum::<u64>();
        Ok(pkts.len())
    }
    fn max_frame(&self) -> usize {
        self.max_frame
    }
    fn kernel_stats(&self) -> KernelStats {
        let (p, b) = match self.what {
            "sink" => ("sink_packets", "sink_bytes"),
            _ => ("discarded_packets", "discarded_bytes"),
        };
        KernelStats {
            counters: vec![(p, self.pkts), (b, self.bytes)],
        }
    }
}

// ---------------------------------------------------------------------------
// The SPSC ring.

/// An index padded to its own cache line (128 bytes: adjacent-line prefetch).
#[repr(align(128))]
struct Padded(AtomicU32);

/// Producer-private state, on its own cache line.
#[repr(align(128))]
struct ProdLocal {
    cached_tail: UnsafeCell<u32>,
}

/// Consumer-private state, on its own cache line.
#[repr(align(128))]
struct ConsLocal {
    cached_head: UnsafeCell<u32>,
}

/// A single-producer single-consumer ring of `u64` descriptors. Indices run
/// freely (wrapping u32) and are masked on access. The producer publishes a
/// whole batch with one release store of `head`; the consumer frees a whole
/// batch with one release store of `tail`.
pub struct Spsc {
    head: Padded,
    tail: Padded,
    prod: ProdLocal,
    cons: ConsLocal,
    mask: u32,
    slots: Box<[UnsafeCell<u64>]>,
}

// SAFETY: each slot is written only by the producer before it publishes it
// (release store of head) and read only by the consumer after it sees it
// (acquire load of head); the reverse holds for freeing (tail). The
// producer-/consumer-private caches are touched by one side only: the
// `Producer`/`Consumer` handles below are the only way in, one of each.
unsafe impl Sync for Spsc {}
unsafe impl Send for Spsc {}

impl Spsc {
    /// A ring of `cap` slots (rounded up to a power of two, at least 2).
    pub fn new(cap: usize) -> Spsc {
        let cap = cap.max(2).next_power_of_two();
        Spsc {
            head: Padded(AtomicU32::new(0)),
            tail: Padded(AtomicU32::new(0)),
            prod: ProdLocal {
                cached_tail: UnsafeCell::new(0),
            },
            cons: ConsLocal {
                cached_head: UnsafeCell::new(0),
            },
            mask: cap as u32 - 1,
            slots: (0..cap).map(|_| UnsafeCell::new(0)).collect(),
        }
    }
    pub fn capacity(&self) -> usize {
        self.mask as usize + 1
    }
    /// Split into the two handles.
    pub fn split(self) -> (Producer, Consumer) {
        let r = Arc::new(self);
        (Producer { r: r.clone() }, Consumer { r })
    }
}

/// The producer side of an [`Spsc`] ring (one thread at a time).
pub struct Producer {
    r: Arc<Spsc>,
}

/// The consumer side of an [`Spsc`] ring (one thread at a time).
pub struct Consumer {
    r: Arc<Spsc>,
}

impl Producer {
    /// Free slots, refreshing the cached consumer index only when needed.
    #[inline(always)]
    fn room(&mut self, want: u32) -> (u32, u32) {
        let r = &*self.r;
        // Relaxed: we are the only writer of head.
        let head = r.head.0.load(Ordering::Relaxed);
        // SAFETY: producer-private.
        let ct = unsafe { &mut *r.prod.cached_tail.get() };
        let cap = r.mask + 1;
        let mut free = cap - head.wrapping_sub(*ct);
        if free < want {
            *ct = r.tail.0.load(Ordering::Acquire);
            free = cap - head.wrapping_sub(*ct);
        }
        (head, free)
    }
    /// Push up to `src.len()` descriptors; returns how many were pushed
    /// (one release store for all of them).
    #[inline]
    pub fn push_slice(&mut self, src: &[u64]) -> usize {
        let (head, free) = self.room(src.len() as u32);
        let n = (free as usize).min(src.len());
        let r = &*self.r;
        for (i, d) in src[..n].iter().enumerate() {
            let s = head.wrapping_add(i as u32) & r.mask;
            // SAFETY: slot s is free (between tail and head+cap) and only the producer writes it.
            unsafe { *r.slots[s as usize].get() = *d };
        }
        if n > 0 {
            r.head
                .0
                .store(head.wrapping_add(n as u32), Ordering::Release);
        }
        n
    }
    /// Free slots, reading the consumer's index only if fewer than `want`
    /// are known to be free.
    pub fn free(&mut self, want: usize) -> usize {
        self.room(want.min(u32::MAX as usize) as u32).1 as usize
    }
}

impl Consumer {
    #[inline(always)]
    fn avail(&mut self, want: u32) -> (u32, u32) {
        let r = &*self.r;
        // Relaxed: we are the only writer of tail.
        let tail = r.tail.0.load(Ordering::Relaxed);
        // SAFETY: consumer-private.
        let ch = unsafe { &mut *r.cons.cached_head.get() };
        let mut n = ch.wrapping_sub(tail);
        if n < want {
            *ch = r.head.0.load(Ordering::Acquire);
            n = ch.wrapping_sub(tail);
        }
        (tail, n)
    }
    /// Pop up to `max` descriptors, calling `f` on each (one release store for all).
    #[inline]
    pub fn pop_with(&mut self, max: usize, mut f: impl FnMut(u64)) -> usize {
        let (tail, avail) = self.avail(max.min(u32::MAX as usize) as u32);
        let n = (avail as usize).min(max);
        let r = &*self.r;
        for i in 0..n {
            let s = tail.wrapping_add(i as u32) & r.mask;
            // SAFETY: slot s was published by the producer (acquire above).
            f(unsafe { *r.slots[s as usize].get() });
        }
        if n > 0 {
            r.tail
                .0
                .store(tail.wrapping_add(n as u32), Ordering::Release);
        }
        n
    }
    /// Descriptors waiting right now.
    pub fn len(&mut self) -> usize {
        self.avail(u32::MAX).1 as usize
    }
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }
}

// ---------------------------------------------------------------------------
// Named links.

/// One direction of a link: frames of the sender's pool travel through
/// `data` to the receiver and come back through `ret`.
struct Direction {
    region: Region,
}

/// A link between end 0 and end 1; `dir[e]` carries what end `e` sends.
struct Link {
    dir: [Direction; 2],
}

struct Entry {
    link: Weak<Link>,
    opened: u32,
    /// Handles of the rings for end 1, parked until end 1 is opened.
    parked: Option<(Box<LinkTx>, Box<LinkRx>)>,
}

fn registry() -> &'static Mutex<HashMap<String, Entry>> {
    static REG: std::sync::OnceLock<Mutex<HashMap<String, Entry>>> = std::sync::OnceLock::new();
    REG.get_or_init(|| Mutex::new(HashMap::new()))
}

fn open_link(uri: &Uri, opts: &OpenOptions) -> Result<Port, PortError> {
    let name = uri.target.clone();
    let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = reg.get_mut(&name) {
        // Alive = someone besides the parked end-1 halves (two Arcs) and
        // this upgrade holds the link, i.e. end 0 (or end 1) is still open.
        let alive = e
            .link
            .upgrade()
            .is_some_and(|l| e.opened >= 2 || Arc::strong_count(&l) > 3);
        if alive {
            if e.opened >= 2 {
                return Err(uri.err(format!(
                    "link '{name}' already has both ends open (a mem link has two ends)"
                )));
            }
            e.opened = 2;
            let (tx, rx) = e.parked.take().ok_or_else(|| uri.err("link end lost"))?;
            return Ok(link_port(uri, 1, tx, rx));
        }
        // The ends of an earlier link are gone: start afresh.
        reg.remove(&name);
    }
    let ring = (opts.ring_size.max(MAX_BATCH as u32 * 2) as usize).next_power_of_two();
    // Each end's pool: the data ring's frames plus the frames the receiver
    // may hold in batches and in the return ring.
    let frames = (ring * 2) as u32;
    let fs = opts.frame_size.max(64);
    if frames as u64 * fs as u64 >= u32::MAX as u64 {
        return Err(uri.err("ring_size * frame_size too large for a mem link"));
    }
    let mk = || Region::new(frames, fs).map_err(|e| uri.err(format!("cannot map frames: {e}")));
    let link = Arc::new(Link {
        dir: [Direction { region: mk()? }, Direction { region: mk()? }],
    });
    let mut ends: Vec<(Box<LinkTx>, Box<LinkRx>)> = Vec::new();
    let (d0p, d0c) = Spsc::new(ring).split();
    let (r0p, r0c) = Spsc::new(frames as usize).split();
    let (d1p, d1c) = Spsc::new(ring).split();
    let (r1p, r1c) = Spsc::new(frames as usize).split();
    // End 0 sends on data 0, gets frames back on ret 0; end 1 receives data 0, returns on ret 0.
    let mut d0p = Some(d0p);
    let mut d1p = Some(d1p);
    let mut r0c = Some(r0c);
    let mut r1c = Some(r1c);
    let mut d0c = Some(d0c);
    let mut d1c = Some(d1c);
    let mut r0p = Some(r0p);
    let mut r1p = Some(r1p);
    for e in 0..2usize {
        let (data, ret_in, rx_data, rx_ret) = if e == 0 {
            (d0p.take(), r0c.take(), d1c.take(), r1p.take())
        } else {
            (d1p.take(), r1c.take(), d0c.take(), r0p.take())
        };
        let (Some(data), Some(ret_in), Some(rx_data), Some(rx_ret)) =
            (data, ret_in, rx_data, rx_ret)
        else {
            return Err(uri.err("internal: ring handles"));
        };
        let tx = Box::new(LinkTx {
            link: link.clone(),
            end: e,
            free: FreeStack::new(0, frames, fs),
            frame_size: fs,
            data,
            ret: ret_in,
            descs: [0; MAX_BATCH],
            sent: 0,
            ring_full: 0,
            no_frame: 0,
            too_big: 0,
        });
        let rx = Box::new(LinkRx {
            id: PortId::fresh(),
            link: link.clone(),
            peer: 1 - e,
            data: rx_data,
            ret: rx_ret,
            addrs: [0; MAX_BATCH],
            received: 0,
        });
        ends.push((tx, rx));
    }
    let end1 = ends.pop();
    let end0 = ends.pop();
    let (Some(end0), Some(end1)) = (end0, end1) else {
        return Err(uri.err("internal: link ends"));
    };
    reg.insert(
        name,
        Entry {
            link: Arc::downgrade(&link),
            opened: 1,
            parked: Some(end1),
        },
    );
    drop(link);
    Ok(link_port(uri, 0, end0.0, end0.1))
}

fn link_port(uri: &Uri, end: usize, tx: Box<LinkTx>, rx: Box<LinkRx>) -> Port {
    Port {
        info: PortInfo {
            uri: uri.text.clone(),
            kind: "mem",
            detail: format!(
                "in-process link '{}', end {end}, ring {} descriptors, {} frames of {} bytes",
                uri.target,
                tx.data.r.capacity(),
                tx.free.len(),
                tx.frame_size
            ),
            clock: "none",
            ifindex: None,
            ifname: None,
        },
        rx,
        tx,
    }
}

/// Descriptor: frame address (high 32 bits) and length (low 32 bits).
#[inline(always)]
fn desc(addr: u64, len: u32) -> u64 {
    (addr << 32) | len as u64
}

struct LinkTx {
    link: Arc<Link>,
    end: usize,
    free: FreeStack,
    frame_size: u32,
    data: Producer,
    ret: Consumer,
    descs: [u64; MAX_BATCH],
    sent: u64,
    ring_full: u64,
    no_frame: u64,
    too_big: u64,
}

impl TxPort for LinkTx {
    fn send(&mut self, pkts: &[Pkt]) -> Result<usize, PortError> {
        // Reclaim frames the receiver released (one acquire + one release per batch).
        let free = &mut self.free;
        self.ret.pop_with(usize::MAX, |a| free.push(a));
        let region = &self.link.dir[self.end].region;
        let mut total = 0;
        let mut out_of_frames = false;
        // Work in chunks of at most MAX_BATCH descriptors.
        for chunk in pkts.chunks(MAX_BATCH) {
            let room = self.data.free(chunk.len()).min(chunk.len());
            let mut n = 0; // descriptors filled
            let mut taken = 0; // packets consumed from the front
            for p in &chunk[..room] {
                if p.len() > self.frame_size {
                    // Counted and consumed: it can never fit, retrying would not help.
                    self.too_big += 1;
                    taken += 1;
                    continue;
                }
                let Some(addr) = self.free.pop() else {
                    out_of_frames = true;
                    break;
                };
                // SAFETY: addr is a frame of our own region, free (not in any ring
                // nor held by the receiver); the packet fits in a frame.
                unsafe {
                    std::ptr::copy_nonoverlapping(p.as_ptr(), region.at(addr), p.len() as usize);
                }
                self.descs[n] = desc(addr, p.len());
                n += 1;
                taken += 1;
            }
            let pushed = self.data.push_slice(&self.descs[..n]);
            debug_assert_eq!(pushed, n, "room was checked");
            self.sent += pushed as u64;
            total += taken;
            if taken < chunk.len() {
                break;
            }
        }
        let not_taken = (pkts.len() - total) as u64;
        self.ring_full += not_taken;
        if out_of_frames {
            self.no_frame += not_taken;
        }
        Ok(total)
    }
    fn in_flight(&self) -> usize {
        0
    }
    fn max_frame(&self) -> usize {
        self.frame_size as usize
    }
    fn kernel_stats(&self) -> KernelStats {
        KernelStats {
            counters: vec![
                ("tx_packets", self.sent),
                ("ring_full", self.ring_full),
                ("ring_full_no_frame", self.no_frame),
                ("tx_too_big_drops", self.too_big),
            ],
        }
    }
}

struct LinkRx {
    id: PortId,
    link: Arc<Link>,
    peer: usize,
    data: Consumer,
    ret: Producer,
    addrs: [u64; MAX_BATCH],
    received: u64,
}

impl RxPort for LinkRx {
    fn recv(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        batch.claim(self.id)?;
        batch.hold(&self.link);
        let region = &self.link.dir[self.peer].region;
        let n = self.data.pop_with(batch.room(), |d| {
            let addr = d >> 32;
            let len = d as u32;
            // SAFETY: the sender only publishes addresses of its own frames,
            // and takes a frame back only once `release` returned it through
            // the return ring; the link (both regions) is held by the batch.
            batch.push(unsafe { Pkt::from_raw(region.at(addr), len, addr, 0) });
        });
        self.received += n as u64;
        Ok(n)
    }
    fn release(&mut self, batch: &mut Batch) -> Result<(), PortError> {
        // Only this link's frames go into its return ring: another link's
        // addresses would be written into this sender's pool.
        batch.check_owner(self.id)?;
        // The return ring holds every frame of the peer's pool, so it never fills.
        for chunk in batch.pkts().chunks(MAX_BATCH) {
            for (a, p) in self.addrs.iter_mut().zip(chunk) {
                *a = p.handle();
            }
            let n = self.ret.push_slice(&self.addrs[..chunk.len()]);
            debug_assert_eq!(n, chunk.len());
        }
        batch.clear();
        Ok(())
    }
    fn kernel_stats(&self) -> KernelStats {
        KernelStats {
            counters: vec![("rx_packets", self.received)],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_hands_out_its_frames_again_only_once_all_are_back() {
        let mut src = SourceRx::new(64).unwrap();
        let (mut a, mut b) = (Batch::new(MAX_BATCH), Batch::new(MAX_BATCH));
        assert_eq!(src.recv(&mut a).unwrap(), MAX_BATCH);
        // `a` still holds every frame: a second batch gets none of them.
        assert_eq!(src.recv(&mut b).unwrap(), 0);
        // A batch of other memory (no port filled it) is refused here and
        // frees nothing.
        let other = [0u8; 64];
        let mut c = Batch::new(4);
        // SAFETY: a descriptor of a live buffer, never written.
        c.push(unsafe { Pkt::from_raw(other.as_ptr() as *mut u8, 64, 0, 0) });
        assert!(src.release(&mut c).is_err());
        assert_eq!(c.len(), 1);
        assert_eq!(src.recv(&mut b).unwrap(), 0);
        src.release(&mut a).unwrap();
        assert_eq!(src.recv(&mut b).unwrap(), MAX_BATCH);
        src.release(&mut b).unwrap();
    }
}
