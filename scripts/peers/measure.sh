#!/usr/bin/env bash
# Development benchmark of the peer DuTs on a private test bed (testbed.sh), with trafgen
# (gen-trafgen.sh, on GEN_CPU, default 0) as the generator and the DuT on DUT_CPU (default 1).
# For each peer: start, warm up, verify (1000 frames), send at top speed for SECONDS (default 10),
# count at the sink (s0 rx_packets), stop. Prints a table; a peer that delivers less than 99% of
# what the generator sent is flagged "DROPS". Peers that are unavailable (exit 3) are skipped.
#
# usage: measure.sh [PEER...]     PEER: bridge ipfwd testpmd-af_xdp testpmd-af_packet ovs-afxdp
#                                       ovs-system null
# env: SECONDS_PER_PEER (10), GEN_CPU (0), DUT_CPU (1), BED (testbed name, default lrpm<pid>)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
PEER_NAME=measure
need_root

secs=${SECONDS_PER_PEER:-10} gcpu=${GEN_CPU:-0} dcpu=${DUT_CPU:-1}
bed=${BED:-lrpm$$}
peers=("$@")
[[ ${#peers[@]} -gt 0 ]] || peers=(bridge ipfwd testpmd-af_xdp testpmd-af_packet ovs-afxdp ovs-system null)
GEN=$bed-gen DUT=$bed-dut SINK=$bed-sink
S0_MAC=02:00:00:00:02:02 D0_MAC=02:00:00:00:01:02 S0_IP=10.77.2.2

current_stop=
cleanup() {
    if [[ -n $current_stop ]]; then
        eval "$current_stop" >/dev/null 2>&1 || true
    fi
    "$here/testbed.sh" down "$bed" || true
}
trap cleanup EXIT
"$here/testbed.sh" up "$bed" >/dev/null

results=()
row() { results+=("$(printf '%-20s %10s %10s %10s  %s' "$@")"); }

for p in "${peers[@]}"; do
    dmac=$S0_MAC
    case $p in
        bridge) start=("$here/dut-bridge.sh" start "$DUT" "$dcpu"); stop=("$here/dut-bridge.sh" stop "$DUT") ;;
        ipfwd) start=("$here/dut-ipfwd.sh" start "$DUT" "$S0_IP" "$S0_MAC" "$dcpu"); stop=("$here/dut-ipfwd.sh" stop "$DUT"); dmac=$D0_MAC ;;
        testpmd-af_xdp) start=("$here/dut-testpmd.sh" start "$DUT" af_xdp "$dcpu"); stop=("$here/dut-testpmd.sh" stop "$DUT") ;;
        testpmd-af_packet) start=("$here/dut-testpmd.sh" start "$DUT" af_packet "$dcpu"); stop=("$here/dut-testpmd.sh" stop "$DUT") ;;
        ovs-afxdp) start=("$here/dut-ovs.sh" start "$DUT" afxdp "$dcpu"); stop=("$here/dut-ovs.sh" stop "$DUT") ;;
        ovs-system) start=("$here/dut-ovs.sh" start "$DUT" system "$dcpu"); stop=("$here/dut-ovs.sh" stop "$DUT") ;;
        null)
            rc=0
            out=$("$here/dut-testpmd.sh" null "$secs" "$dcpu" 2>&1) || rc=$?
            if (( rc == 0 )); then
                row "testpmd-null" "-" "$(awk '/port 0/ {print $(NF-1)}' <<<"$out")" "-" "Mpps per port, no I/O (pure CPU reference)"
            else
                row "testpmd-null" "-" "-" "-" "$( ((rc == 3)) && echo SKIPPED || echo FAILED): $(tail -n1 <<<"$out")"
            fi
            continue
            ;;
        *) echo "measure: unknown peer '$p'" >&2; exit 2 ;;
    esac
    echo "measure: $p ..." >&2
    rc=0
    out=$("${start[@]}" 2>&1) || rc=$?
    if (( rc != 0 )); then
        "${stop[@]}" >/dev/null 2>&1 || true
        row "$p" "-" "-" "-" "$( ((rc == 3)) && echo SKIPPED || echo FAILED): $(tail -n1 <<<"$out")"
        continue
    fi
    current_stop=$(printf '%q ' "${stop[@]}")
    # Warm-up (the af_packet PMD can lose up to one ring of frames right after start), then check.
    "$here/verify.sh" "$GEN" g0 "$SINK" s0 "$dmac" "$S0_IP" 2048 >/dev/null 2>&1 || true
    if ! v=$("$here/verify.sh" "$GEN" g0 "$SINK" s0 "$dmac" "$S0_IP" 1000 2>&1); then
        row "$p" "-" "-" "-" "FAILED: $v"
        "${stop[@]}" >/dev/null 2>&1 || true
        current_stop=
        continue
    fi
    before=$(rx_packets "$SINK" s0)
    g=$("$here/gen-trafgen.sh" "$GEN" g0 "$dmac" "$S0_IP" "$secs" "$gcpu" 2>/dev/null) || g="sent=0"
    sleep 0.5
    after=$(rx_packets "$SINK" s0)
    "${stop[@]}" >/dev/null
    current_stop=
    sent=$(sed -n 's/.*sent=\([0-9]*\).*/\1/p' <<<"$g")
    got=$((after - before))
    note=ok
    if (( sent == 0 )); then
        note="generator failed"
    elif (( got * 100 < sent * 99 )); then
        note="DROPS: forwarded $(( got * 100 / sent ))% of what the generator sent"
    fi
    row "$p" "$(awk -v n="$sent" -v s="$secs" 'BEGIN{printf "%.3f", n/s/1e6}')" \
        "$(awk -v n="$got" -v s="$secs" 'BEGIN{printf "%.3f", n/s/1e6}')" "$got" "$note"
done

printf '%-20s %10s %10s %10s  %s\n' "peer" "gen Mpps" "sink Mpps" "sink pkts" "note"
printf '%s\n' "${results[@]}"
echo "(${secs} s per peer, generator trafgen on CPU $gcpu, DuT on CPU $dcpu, 60-byte frames + FCS = 64 B)"
