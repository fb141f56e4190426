//! The XDP programs linerate loads, compiled from `src/xdp/*.bpf.c` by
//! `build.rs`. Each constant is the ELF object; load it with
//! [`crate::xdp::XdpProgram::load`].

/// An ELF object embedded with 8-byte alignment (the ELF parser reads
/// 64-bit fields in place).
#[repr(C, align(8))]
pub struct Aligned<B: ?Sized>(pub B);

macro_rules! bpf_object {
    ($(#[$m:meta])* $name:ident, $file:literal) => {
        $(#[$m])*
        pub static $name: &Aligned<[u8]> =
            &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/", $file)));
    };
}

bpf_object!(
    /// `xdp_pass`: returns XDP_PASS (activates native XDP on a veth receiver).
    XDP_PASS,
    "pass.bpf.o"
);

bpf_object!(
    /// `xdp_count`: the sink counter (see [`crate::xdp::count`]).
    XDP_COUNT,
    "count.bpf.o"
);

bpf_object!(
    /// `xdp_fwd`: the in-kernel L2 forwarder (see [`crate::xdp::fwd`]).
    XDP_FWD,
    "fwd.bpf.o"
);

bpf_object!(
    /// `xdp_redirect_bare`: a devmap redirect without counters, the
    /// benchmark reference "bare XDP_REDIRECT" (see [`crate::xdp::fwd::XdpRedirectBare`]).
    XDP_REDIRECT_BARE,
    "redirect_bare.bpf.o"
);

bpf_object!(
    /// `xdp_gen`: the generator run by BPF_PROG_RUN with live frames (see [`crate::xdp::generator`]).
    XDP_GEN,
    "generator.bpf.o"
);

bpf_object!(
    /// `xsk_redirect`: redirects each RX queue to the AF_XDP socket in
    /// `xsks_map` at the queue's index (XDP_PASS when there is none).
    XSK_REDIRECT,
    "xsk_redirect.bpf.o"
);

bpf_object!(
    /// `xdp_switch`: the switch's offloaded flows on an `afxdp:` port (see
    /// [`crate::xdp::switch_offload`]); what it does not forward goes up
    /// `xsks_map` as with [`XSK_REDIRECT`].
    XDP_SWITCH,
    "switch_offload.bpf.o"
);
