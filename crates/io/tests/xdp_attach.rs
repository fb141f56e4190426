//! Attaching an XDP program to a veth in a private namespace, and its
//! removal when the program object is dropped.
use linerate_io::xdp::{AttachMode, XdpProgram};
use std::process::Command;

use linerate_testkit::{wait_until, Netns};

fn sh(args: &[&str]) -> String {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("run");
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[test]
fn attach_and_detach_on_drop() {
    let ns = Netns::one("lrxa");
    // The pair stays down, as the program is attached to it here.
    ns.ip(&["link", "add", "xa0", "type", "veth", "peer", "name", "xa1"]);
    ns.run(move || {
        let idx = unsafe { libc::if_nametoindex(c"xa0".as_ptr()) };
        assert!(idx > 0);
        for mode in [AttachMode::Native, AttachMode::Generic] {
            let mut p =
                XdpProgram::load(&linerate_io::xdp::objects::XDP_PASS.0, "xdp_pass", "test")
                    .unwrap();
            p.attach(idx, mode).unwrap();
            let shown = sh(&["ip", "link", "show", "xa0"]);
            assert!(shown.contains("xdp"), "attached in {mode:?}: {shown}");
            drop(p);
            // The kernel releases a bpf_link asynchronously on the last close.
            wait_until(
                std::time::Duration::from_secs(10),
                &format!("detached in {mode:?} after the drop"),
                || !sh(&["ip", "link", "show", "xa0"]).contains("prog/xdp"),
            );
        }
    });
}
