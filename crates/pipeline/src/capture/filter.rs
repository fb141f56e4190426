//! Packet filters in libpcap filter syntax (`tcp port 80 and host 10.0.0.1`),
//! compiled by libpcap itself, so every expression means exactly what it
//! means to tcpdump (pcap-filter(7)); no home-made compiler.
//!
//! An expression is compiled once with `pcap_open_dead(DLT_EN10MB, 65535)` +
//! `pcap_compile` into a classic BPF program, which is then run on each
//! packet by `pcap_offline_filter` (libpcap's BPF interpreter: no
//! allocation, no syscall, no lock; the program is only read, so one
//! [`Filter`] can be shared by threads).
//!
//! FFI: a hand-written extern block of the five libpcap functions used,
//! linked with `-lpcap` (libpcap-dev). The `pcap` crate would do the same
//! through more surface (live capture, savefiles) than a filter needs, and a
//! dependency for five declarations is not worth it.
//!
//! `pcap_compile` is not thread-safe in libpcap < 1.8 (a global parser
//! state): compilation takes a process-wide mutex. Matching does not.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::Mutex;

#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut c_void,
}

#[repr(C)]
struct PcapPkthdr {
    ts: libc::timeval,
    caplen: u32,
    len: u32,
}

#[link(name = "pcap")]
extern "C" {
    fn pcap_open_dead(linktype: c_int, snaplen: c_int) -> *mut c_void;
    fn pcap_close(p: *mut c_void);
    fn pcap_compile(
        p: *mut c_void,
        fp: *mut BpfProgram,
        s: *const c_char,
        optimize: c_int,
        netmask: u32,
    ) -> c_int;
    fn pcap_geterr(p: *mut c_void) -> *const c_char;
    fn pcap_freecode(fp: *mut BpfProgram);
    fn pcap_offline_filter(fp: *const BpfProgram, h: *const PcapPkthdr, pkt: *const u8) -> c_int;
}

const DLT_EN10MB: c_int = 1;
const SNAPLEN: c_int = 65535;
const PCAP_NETMASK_UNKNOWN: u32 = 0xffff_ffff;

static COMPILE_LOCK: Mutex<()> = Mutex::new(());

/// A compiled libpcap filter expression.
pub struct Filter {
    prog: BpfProgram,
    expr: String,
}

// SAFETY: the program is immutable after compilation; pcap_offline_filter
// only reads it (bpf_filter over a const program and a const packet).
unsafe impl Send for Filter {}
unsafe impl Sync for Filter {}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Filter({:?}, {} insns)", self.expr, self.prog.bf_len)
    }
}

impl Filter {
    /// Compile `expr` for Ethernet frames. Errors are one line:
    /// `filter 'tcp prot 80': syntax error` with libpcap's own message.
    pub fn compile(expr: &str) -> Result<Filter, String> {
        let c = CString::new(expr)
            .map_err(|_| format!("filter '{}': contains a NUL byte", expr.escape_debug()))?;
        // A poisoned lock only means another compile panicked; the guarded
        // state is libpcap's, which that panic did not touch.
        let _g = COMPILE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: plain libpcap calls; `p` is checked, closed on every path;
        // `prog` is written by pcap_compile only on success.
        unsafe {
            let p = pcap_open_dead(DLT_EN10MB, SNAPLEN);
            if p.is_null() {
                return Err(format!(
                    "filter '{}': pcap_open_dead failed",
                    expr.escape_debug()
                ));
            }
            let mut prog = BpfProgram {
                bf_len: 0,
                bf_insns: std::ptr::null_mut(),
            };
            let rc = pcap_compile(p, &mut prog, c.as_ptr(), 1, PCAP_NETMASK_UNKNOWN);
            if rc != 0 {
                let msg = CStr::from_ptr(pcap_geterr(p)).to_string_lossy();
                let msg = msg.lines().next().unwrap_or("").trim().to_string();
                pcap_close(p);
                return Err(format!("filter '{}': {msg}", expr.escape_debug()));
            }
            pcap_close(p);
            Ok(Filter {
                prog,
                expr: expr.to_string(),
            })
        }
    }

    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// Number of BPF instructions.
    pub fn len(&self) -> usize {
        self.prog.bf_len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.prog.bf_len == 0
    }

    /// Does the Ethernet frame `frame` match? Frames longer than 4 GiB
    /// cannot exist here; the captured length is the slice length.
    #[inline]
    pub fn matches(&self, frame: &[u8]) -> bool {
        let len = frame.len().min(u32::MAX as usize) as u32;
        let h = PcapPkthdr {
            ts: libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            },
            caplen: len,
            len,
        };
        // SAFETY: the program is valid until Drop; bpf_filter bounds every
        // load by caplen, so any byte slice is safe to pass.
        unsafe { pcap_offline_filter(&self.prog, &h, frame.as_ptr()) != 0 }
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        // SAFETY: prog came from a successful pcap_compile and is freed once.
        unsafe { pcap_freecode(&mut self.prog) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compile_errors_are_one_line() {
        let e = Filter::compile("tcp prot 80").unwrap_err();
        assert!(e.starts_with("filter 'tcp prot 80': "), "{e}");
        assert!(!e.contains('\n'));
        assert!(
            e.len() > "filter 'tcp prot 80': ".len(),
            "libpcap message included: {e}"
        );
        assert!(Filter::compile("a\0b").unwrap_err().contains("NUL"));
        assert!(Filter::compile("host 999.1.1.1").is_err());
        // Found by fuzzing: a newline in the expression made the message
        // two lines.
        let e = Filter::compile("vlan 10 and\nfoo 80\r\n").unwrap_err();
        assert!(
            e.starts_with("filter 'vlan 10 and\\nfoo 80\\r\\n': "),
            "{e}"
        );
        assert!(!e.contains('\n') && !e.contains('\r'), "{e:?}");
    }

    #[test]
    fn threads_compile_and_match() {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                std::thread::spawn(move || {
                    for j in 0..50 {
                        let f =
                            Filter::compile(&format!("udp port {}", 1000 + i * 100 + j)).unwrap();
                        assert!(!f.is_empty());
                        assert!(!f.matches(&[0u8; 10]), "short frame does not match");
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let all = Filter::compile("").unwrap();
        assert!(all.matches(&[0u8; 60]));
        assert!(all.matches(&[]));
    }
}
