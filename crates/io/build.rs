//! Compile every XDP program, `src/xdp/NAME.bpf.c` (each beside its
//! loader `src/xdp/NAME.rs`), with clang into `$OUT_DIR/NAME.bpf.o`.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let dir = PathBuf::from("src/xdp");
    println!("cargo:rerun-if-changed=src/xdp");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("crates/io/src/xdp exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    entries.sort();
    for src in entries {
        println!("cargo:rerun-if-changed={}", src.display());
        let obj = out.join(src.with_extension("o").file_name().unwrap());
        let st = Command::new(&clang)
            .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
            .arg("-I/usr/include/x86_64-linux-gnu")
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status()
            .unwrap_or_else(|e| {
                panic!("cannot run {clang} to build the XDP programs ({e}); install it: apt-get install clang libbpf-dev")
            });
        assert!(st.success(), "clang failed on {}", src.display());
    }
}
