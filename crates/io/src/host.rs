//! Facts about and settings of the machine the tools run on: CPU pinning,
//! the kernel's release.

/// Pin the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain data (CPU_SET is bounded above);
    // sched_setaffinity(0) targets the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `uname -r` (empty when it cannot be read).
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn pins_to_cpu_zero_and_refuses_a_cpu_out_of_range() {
        std::thread::spawn(|| {
            super::pin_to_cpu(0).unwrap();
            assert!(super::pin_to_cpu(1 << 20).is_err());
        })
        .join()
        .unwrap();
        assert!(!super::kernel_release().is_empty());
    }
}
