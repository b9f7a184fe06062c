#!/bin/sh
# Runs the tests of package msl (the emulated device's engine) and of
# internal/clang (its toolchain) for GOARCH=arm64 under qemu user-mode
# emulation on an x86-64 Debian machine: kernels and the runtime are
# compiled by the host's x86-64 clang++ for aarch64 and loaded into the
# arm64 process, which runs the runtime's aarch64 fiber switch, the access
# hooks and every kind of kernel fault, barriers, SIMD-group functions,
# the counters and the time limit.
#
# The machine needs, as root:
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install -y qemu-user clang lld libc6:arm64 \
#     libc6-dev-arm64-cross libgcc-12-dev-arm64-cross
# (libc6:arm64 must be the same version as the host's libc6.) The cross
# packages are the aarch64 C headers, libraries and start files clang++
# links against (Debian's own cross toolchain layout, /usr/aarch64-linux-gnu
# and /usr/lib/gcc-cross); they install beside the host's without
# touching its packages. The tests need neither the Objective-C runtime
# nor Foundation.
#
# The tests run twice: with 4 KiB pages, then package msl again with the
# 64 KiB pages some arm64 Linux kernels use (qemu-aarch64 -p 65536: the
# page size the process is told, and mmap's granularity), which the
# runtime's guard pages and arenas follow. TestGDNDecodeSpeed is left out:
# its bound is on wall-clock time, which under qemu measures the emulator
# (TestGDNDecode checks the same kernel's results and counts). Extra
# arguments go to go test, e.g. -v or -run TestAtomics.
set -eu
command -v qemu-aarch64 >/dev/null || { echo "run-arm64.sh: qemu-aarch64 not found (apt-get install qemu-user)" >&2; exit 1; }
[ -e /lib/ld-linux-aarch64.so.1 ] || { echo "run-arm64.sh: no arm64 C library (apt-get install libc6:arm64)" >&2; exit 1; }
[ -e /usr/aarch64-linux-gnu/include/stdio.h ] || { echo "run-arm64.sh: no aarch64 C headers for clang (apt-get install libc6-dev-arm64-cross libgcc-12-dev-arm64-cross)" >&2; exit 1; }
command -v ld.lld >/dev/null || { echo "run-arm64.sh: ld.lld not found (apt-get install lld)" >&2; exit 1; }
cd "$(dirname "$0")/../../.."
export CGO_ENABLED=0 GOARCH=arm64
go test -count=1 -exec 'qemu-aarch64 -L /' -skip '^TestGDNDecodeSpeed$' "$@" ./emu/msl/ ./internal/clang/
echo "run-arm64.sh: again with 64 KiB pages"
go test -count=1 -exec 'qemu-aarch64 -p 65536 -L /' -skip '^TestGDNDecodeSpeed$' "$@" ./emu/msl/
