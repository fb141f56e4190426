//! Compile every XDP program in `bpf/*.c` with clang into `$OUT_DIR/NAME.o`.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let dir = PathBuf::from("bpf");
    println!("cargo:rerun-if-changed=bpf");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("crates/io/bpf exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    entries.sort();
    for src in entries {
        println!("cargo:rerun-if-changed={}", src.display());
        let obj = out.join(src.with_extension("o").file_name().unwrap());
        let st = Command::new(&clang)
            .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"])
            .arg("-I/usr/include/x86_64-linux-gnu")
            .arg("-Ibpf")
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
