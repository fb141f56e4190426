"""What the benchmark scripts of scripts/ share."""


def cpu():
    """The CPU's model name, as every figure in docs/BENCHMARKS.md names it."""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"
