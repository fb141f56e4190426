//! Facts about and settings of the machine the tools run on: CPU pinning,
//! the kernel's release.

/// Pin the calling thread to one CPU; the error is one line naming it
/// ("cannot pin to CPU 9: Invalid argument (os error 22)").
pub fn pin_to_cpu(cpu: usize) -> Result<(), String> {
    pin_thread(0, cpu)
}

/// Pin thread `tid` (0: the calling thread; any thread of the machine,
/// e.g. a kernel thread of a test bed) to one CPU; the error is one line
/// naming the CPU.
pub fn pin_thread(tid: u32, cpu: usize) -> Result<(), String> {
    pin(tid, cpu).map_err(|e| {
        if tid == 0 {
            format!("cannot pin to CPU {cpu}: {e}")
        } else {
            format!("cannot pin thread {tid} to CPU {cpu}: {e}")
        }
    })
}

fn pin(tid: u32, cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain data (CPU_SET is bounded above);
    // sched_setaffinity takes the thread id and the set by pointer.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(
            tid as libc::pid_t,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn affinity() -> std::io::Result<libc::cpu_set_t> {
    // SAFETY: a zeroed cpu_set_t is valid; the kernel fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(set)
    }
}

/// Set the CPUs the calling thread may run on (async-signal-safe: usable
/// between fork and exec).
pub fn set_affinity(set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: `set` is a valid cpu_set_t; sched_setaffinity(0) targets
    // the calling thread only.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Keeps the calling thread off one CPU until dropped (then its old CPUs
/// again). Threads and processes it starts meanwhile inherit the mask.
pub struct OffCpu(libc::cpu_set_t);

impl OffCpu {
    /// Off `cpu`, unless that would leave the thread no CPU (then `None`).
    pub fn new(cpu: usize) -> Option<OffCpu> {
        let old = affinity().ok()?;
        let mut set = old;
        if cpu >= libc::CPU_SETSIZE as usize {
            return None;
        }
        // SAFETY: cpu is below CPU_SETSIZE (checked above).
        unsafe { libc::CPU_CLR(cpu, &mut set) };
        // SAFETY: plain read of the set.
        if unsafe { libc::CPU_COUNT(&set) } == 0 {
            return None;
        }
        set_affinity(&set).ok()?;
        Some(OffCpu(old))
    }
    /// The mask the thread had before (for children that should run
    /// anywhere, set between fork and exec).
    pub fn before(&self) -> libc::cpu_set_t {
        self.0
    }
}

impl Drop for OffCpu {
    fn drop(&mut self) {
        let _ = set_affinity(&self.0);
    }
}

/// Every online CPU (the mask a process started afresh would have).
pub fn every_cpu() -> libc::cpu_set_t {
    // SAFETY: sysconf has no preconditions; a zeroed cpu_set_t is valid
    // and CPU_SET is bounded by CPU_SETSIZE below.
    unsafe {
        let n = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for i in 0..n.min(libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(i, &mut set);
        }
        set
    }
}

/// The CPU's model name from /proc/cpuinfo ("unknown" without one).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
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

    #[test]
    fn off_cpu_keeps_the_thread_off_and_restores_its_mask() {
        std::thread::spawn(|| {
            let before = super::affinity().unwrap();
            // SAFETY: plain reads of the set.
            let n = unsafe { libc::CPU_COUNT(&before) };
            let g = super::OffCpu::new(0);
            if n < 2 {
                // Off the only CPU: refused, nothing changed.
                assert!(g.is_none());
                return;
            }
            let g = g.unwrap();
            let now = super::affinity().unwrap();
            // SAFETY: plain reads of the sets.
            unsafe {
                assert!(!libc::CPU_ISSET(0, &now));
                assert_eq!(libc::CPU_COUNT(&now), n - 1);
            }
            drop(g);
            let after = super::affinity().unwrap();
            // SAFETY: plain reads of the sets.
            unsafe { assert_eq!(libc::CPU_COUNT(&after), n) };
        })
        .join()
        .unwrap();
    }
}
