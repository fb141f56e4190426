#!/bin/busybox sh
# linerate bench: the init of a guest that runs a device under test
# (crates/measure/src/bench/dut/vm/init.sh, built into the initramfs by
# vm/image.rs). What it says on the serial console is read by the bench:
# lines that start with "linerate-guest: ".
#   up SECONDS     the NICs are up, SECONDS after the kernel started
#   running        the DuT is started
#   out: LINE      a line of the DuT's `run` output, once it ended
#   run ended with STATUS
#   fail: WHY      set-up failed (the guest then powers off)
# It powers off when the bench writes "stop" on the console, or when the
# DuT's `run` ends by itself.
/bin/busybox --install -s /bin
export PATH=/sbin:/bin
say() { echo "linerate-guest: $*"; }
off() { say "power off"; poweroff -f; sleep 10; }
fail() { say "fail: $*"; off; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
while read -r m; do
  [ -n "$m" ] || continue
  insmod "/lib/modules/$m" || fail "insmod $m"
done < /dut/modules
n=0
while [ ! -e /sys/class/net/eth1 ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
[ -e /sys/class/net/eth1 ] || fail "no eth1: the guest sees fewer than two virtio-net NICs"
. /dut/env
sh -e /dut/net 2>&1 || fail "network set-up (/dut/net) exited with $?"
say "up $(cut -d ' ' -f 1 /proc/uptime)"
if [ -s /dut/start ]; then
  sh /dut/start || fail "start exited with $?"
fi
if [ -s /dut/run ]; then
  # A process group of its own (setsid), so that stop reaches whatever it
  # started. SIGTERM, not SIGINT: a shell without job control starts
  # background commands with SIGINT ignored. SIGKILL 5 s later.
  setsid sh /dut/run > /run/run.log 2>&1 &
  pid=$!
  ( while read -r l; do
      if [ "$l" = stop ]; then kill -TERM -$pid; sleep 5; kill -KILL -$pid; fi
    done < /dev/ttyS0 ) 2>/dev/null &
  say "running"
  wait $pid
  rc=$?
  sed 's/^/linerate-guest: out: /' /run/run.log
  say "run ended with $rc"
else
  say "running"
  while read -r l; do [ "$l" = stop ] && break; done < /dev/ttyS0
fi
if [ -s /dut/stop ]; then
  sh /dut/stop || say "stop exited with $?"
fi
off
