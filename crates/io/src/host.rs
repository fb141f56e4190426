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

/// The set of CPU `cpu` alone (None past `CPU_SETSIZE`).
pub fn cpu_set(cpu: usize) -> Option<libc::cpu_set_t> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return None;
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET is bounded above.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        Some(set)
    }
}

fn pin(tid: u32, cpu: usize) -> std::io::Result<()> {
    let set = cpu_set(cpu).ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: sched_setaffinity takes the thread id and the set by pointer.
    unsafe {
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

/// Steal time per CPU (index: the CPU's number), in ns: time the
/// hypervisor gave the CPU to something else while this guest had work for
/// it (`/proc/stat`'s eighth column, in ticks of 1/USER_HZ s: 10 ms here).
/// On a guest it is when the host stalls the guest's CPUs; 0 on bare
/// metal. Empty when `/proc/stat` cannot be read.
pub fn steal_ns() -> Vec<u64> {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    // SAFETY: sysconf has no preconditions.
    let hz = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        // Failed (-1): Linux's USER_HZ is 100 on every architecture.
        n if n <= 0 => 100,
        n => n as u64,
    };
    parse_steal_ns(&text, hz)
}

/// The `cpuN` lines of a `/proc/stat` text: steal (8th value) in ns at
/// `hz` ticks a second; a missing or malformed CPU is 0.
fn parse_steal_ns(text: &str, hz: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(cpu) = f
            .next()
            .and_then(|n| n.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        // Bounded by the machine: a CPU number past 4096 is not a line of
        // this kernel's.
        if cpu >= 4096 {
            continue;
        }
        let ticks = f.nth(7).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if out.len() <= cpu {
            out.resize(cpu + 1, 0);
        }
        out[cpu] = ticks.saturating_mul(1_000_000_000 / hz);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn steal_is_the_eighth_value_of_each_cpu_line() {
        let text = "cpu  5 0 1 2 3 0 4 30 0 0\n\
                    cpu0 1 0 1 2 3 0 4 10 0 0\n\
                    cpu1 4 0 0 0 0 0 0 20 0 0\n\
                    cpu3 4 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(
            super::parse_steal_ns(text, 100),
            [100_000_000, 200_000_000, 0, 0]
        );
        assert!(super::parse_steal_ns("", 100).is_empty());
        // This machine's: one value per CPU online at least.
        assert!(!super::steal_ns().is_empty());
    }

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
