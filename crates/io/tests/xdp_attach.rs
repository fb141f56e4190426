//! Attaching an XDP program to a veth in a private namespace, and its
//! removal when the program object is dropped.
use linerate_io::xdp::{AttachMode, XdpProgram};
use std::process::Command;

mod common;
use common::{require_root, wait_until};

fn sh(args: &[&str]) -> String {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("run");
    String::from_utf8_lossy(&o.stdout).to_string()
}

struct Ns(String);
impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn attach_and_detach_on_drop() {
    require_root();
    let ns = Ns(format!("lrxa{}", std::process::id()));
    assert!(Command::new("ip")
        .args(["netns", "add", &ns.0])
        .status()
        .unwrap()
        .success());
    assert!(Command::new("ip")
        .args(["-n", &ns.0, "link", "add", "xa0", "type", "veth", "peer", "name", "xa1"])
        .status()
        .unwrap()
        .success());
    let name = ns.0.clone();
    std::thread::spawn(move || {
        let f = std::fs::File::open(format!("/run/netns/{name}")).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: setns on this thread only.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
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
    })
    .join()
    .unwrap();
}
