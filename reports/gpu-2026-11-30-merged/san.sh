#!/usr/bin/env bash
set -u
B="$(cd "$(dirname "$0")" && pwd)"
cd "$B/../.."
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:$B/lib
S=1796056563680363038
{
echo "== memcheck, -lineinfo"
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 4 $B/bitparity check --op router --seed $S --case 4657 --subject cuda --property conformance --no-save --quiet 2>&1 | head -80
} > $OUT/san.log 2>&1
cat $OUT/san.log | head -120
