#!/usr/bin/env bash
# The device check: run on a machine with an NVIDIA GPU (and CuPy), from the repository root,
# with a release `switchyard` at $SY (default target/release/switchyard). Writes under $OUT
# (default ./hardware-out):
#   gpu.txt                 nvidia-smi's view of the card before and after
#   hw-<size>.json          `switchyard hardware`: every suite launch timed, every result verified
#   speed.txt               simulation speed on this machine's CPUs: the default study alone,
#                           then 16 copies at once (throughput of independent runs)
# Sizes come from $SIZES (default "huge"). Compare afterwards on any machine with
#   switchyard hardware --report hw-huge.json --compare <switchyard run --stats file>
set -u
SY=${SY:-target/release/switchyard}
OUT=${OUT:-hardware-out}
SIZES=${SIZES:-huge}
COPIES=${COPIES:-16}
SERVER=${SERVER:-python3 tools/cuda_device.py}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu \
  --format=csv > "$OUT/gpu.txt" 2>&1
nproc >> "$OUT/gpu.txt"
for size in $SIZES; do
  echo "== hardware, size $size"
  TIMEFORMAT="hardware $size: %R s wall"
  time ("$SY" hardware --size "$size" --target sm_90 --server "$SERVER" \
    --out "$OUT/hw-$size.json" 2>&1 | tee "$OUT/hw-$size.log" | tail -40)
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv >> "$OUT/gpu.txt" 2>&1
{
  echo "== default study, one copy"
  TIMEFORMAT="one copy: %R s wall, %U s user"
  time "$SY" > /dev/null
  echo "== default study, $COPIES copies at once"
  TIMEFORMAT="$COPIES copies: %R s wall, %U s user"
  time (for i in $(seq "$COPIES"); do "$SY" > /dev/null & done; wait)
} > "$OUT/speed.txt" 2>&1
cat "$OUT/speed.txt" "$OUT/gpu.txt"
