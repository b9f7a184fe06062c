#!/bin/sh
# Compares the emulated device's speed at an earlier commit with the
# working tree's: builds package msl's test binary for both (the earlier
# one from `git archive` in a temporary folder), then runs
# BenchmarkQwenDecode/workers=1 (one Qwen3.5 decode dispatch on one worker)
# with each in turn, ROUNDS times, and prints every figure, the minimum
# and median of each, and the ratio of the medians. Alternating the two
# binaries keeps a shared machine's changing load from favouring one.
#
#   emu/msl/testdata/bench-compare.sh c0e91ae [ROUNDS] [BENCH]
#
# ROUNDS defaults to 5 (two figures each); BENCH is the -test.bench
# pattern, QwenDecode/workers=1 unless given. Needs what the tests need:
# clang++ and lld. Both binaries compile their kernels into the usual
# benchmark cache folder before timing, so the first round is no slower.
set -eu
[ $# -ge 1 ] || { echo "usage: $0 COMMIT [ROUNDS] [BENCH]" >&2; exit 2; }
old=$1
rounds=${2:-5}
bench=${3:-QwenDecode/workers=1}
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

git -C "$root" archive --prefix=old/ "$old" | tar -x -C "$tmp"
(cd "$tmp/old/emu/msl" && go test -c -o "$tmp/old.test" .)
(cd "$root/emu/msl" && go test -c -o "$tmp/new.test" .)

run() {
	"$1" -test.run '^$' -test.bench "$bench" -test.count 2 |
		awk '/^Benchmark/ { printf "%.1f ", $3 / 1e6 }'
}
: >"$tmp/old.ms"
: >"$tmp/new.ms"
for _ in $(seq "$rounds"); do
	run "$tmp/old.test" >>"$tmp/old.ms"
	run "$tmp/new.test" >>"$tmp/new.ms"
done

stats() {
	tr ' ' '\n' <"$1" | grep . | sort -n |
		awk '{ v[NR] = $1 } END { printf "%.1f %.1f %d", v[1], (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), NR }'
}
set -- $(stats "$tmp/old.ms")
old_min=$1 old_med=$2 n=$3
set -- $(stats "$tmp/new.ms")
new_min=$1 new_med=$2
echo "$bench, ms per dispatch, $n figures each, alternating:"
echo "  $old:          $(cat "$tmp/old.ms")"
echo "  working tree: $(cat "$tmp/new.ms")"
echo "  $old:          min $old_min, median $old_med"
echo "  working tree: min $new_min, median $new_med"
awk -v a="$old_med" -v b="$new_med" 'BEGIN { printf "  median %s / median working tree: %.2fx\n", "'"$old"'", a / b }'
