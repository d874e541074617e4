#!/usr/bin/env bash
# The scaling curve of the parallel machine (issue "Parallel machine"): the same timed runs
# on 1, 2, 4, 8 and 16 threads, wall and CPU seconds each, and a check that every thread
# count wrote byte-identical statistics. Meant for a machine with many cores; run from the
# repository root with a release `switchyard` at $SY. Writes under $OUT:
#   cpu.txt            the machine (lscpu, nproc)
#   scaling.tsv        kernel, threads, wall s, user s, sys s
#   <kernel>-t<N>.json each run's --stats (compared across N)
#   mix4-t<N>.json     a four-process scenario's report at 1, 3, 8 and 16 threads (compared)
# $BUDGET (seconds, default 0 = none) stops before a kernel that would start past it.
set -u
SY=${SY:-target/release/switchyard}
OUT=${OUT:-scaling-out}
THREADS=${THREADS:-"1 2 4 8 16"}
KERNELS=${KERNELS:-"hotspot gemm srad"}
SIZE=${SIZE:-huge}
GPU=${GPU:-h100}
TARGET=${TARGET:-sm_90}
BUDGET=${BUDGET:-0}
mkdir -p "$OUT"
{ nproc; lscpu; } > "$OUT/cpu.txt" 2>&1
t0=$(date +%s)
status=0

for n in 1 3 8 16; do
  "$SY" scenario scenarios/mix4.toml --threads "$n" --json > "$OUT/mix4-t$n.json" || status=1
done
if [ "$(md5sum "$OUT"/mix4-t*.json | awk '{print $1}' | sort -u | wc -l)" = 1 ]; then
  echo "mix4: identical reports for 1, 3, 8 and 16 threads"
else
  echo "mix4: REPORTS DIFFER between thread counts"; status=1
fi

printf 'kernel\tthreads\twall_s\tuser_s\tsys_s\n' > "$OUT/scaling.tsv"
for k in $KERNELS; do
  if [ "$BUDGET" != 0 ] && [ $(( $(date +%s) - t0 )) -gt "$BUDGET" ]; then
    echo "budget of $BUDGET s spent: $k and later kernels not run"; break
  fi
  for n in $THREADS; do
    TIMEFORMAT="%R %U %S"
    times=$( { time "$SY" run "$k" --gpu "$GPU" --size "$SIZE" --target "$TARGET" \
      --threads "$n" --stats "$OUT/$k-t$n.json" > "$OUT/$k-t$n.log" 2>&1; } 2>&1 ) || status=1
    read -r wall user sys <<< "$times"
    printf '%s\t%s\t%s\t%s\t%s\n' "$k" "$n" "$wall" "$user" "$sys" | tee -a "$OUT/scaling.tsv"
  done
  if [ "$(md5sum "$OUT/$k"-t*.json | awk '{print $1}' | sort -u | wc -l)" = 1 ]; then
    echo "$k: identical statistics for threads $THREADS"
  else
    echo "$k: STATISTICS DIFFER between thread counts"; status=1
  fi
done

# Speed-up against one thread, per kernel.
awk -F'\t' 'NR > 1 { if ($2 == 1) one[$1] = $3; if (one[$1] > 0) printf "%s\t%s threads\t%.2fx\n", $1, $2, one[$1] / $3 }' \
  "$OUT/scaling.tsv"
exit $status
