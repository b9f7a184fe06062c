#!/bin/sh
# Runs package objc's tests for GOARCH=arm64 under qemu user-mode emulation
# on an x86-64 Debian machine, against the arm64 GNU Objective-C runtime.
#
# The machine needs, as root:
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install -y qemu-user clang lld libc6:arm64 libobjc4:arm64 \
#     libc6-dev-arm64-cross libgcc-12-dev-arm64-cross
# (libc6:arm64 must be the same version as the host's libc6; the cross
# packages are what clang links testdata/abi.c for aarch64 against.)
#
# GNUstep Base's arm64 packages do not install beside the amd64 ones, so
# the run loads the runtime alone (PUREMETAL_OBJC_FOUNDATION=none): the
# calling-convention tests run, through Go methods and through C methods
# that clang compiles for aarch64; the NSString, NSError and pool tests
# skip with that reason, which strict mode accepts on arm64 only. The
# Example functions need Foundation and are left out.
#
# Extra arguments go to go test, e.g. -v or -run TestSendArgs.
set -eu
command -v qemu-aarch64 >/dev/null || { echo "run-arm64.sh: qemu-aarch64 not found (apt-get install qemu-user)" >&2; exit 1; }
[ -e /lib/ld-linux-aarch64.so.1 ] || { echo "run-arm64.sh: no arm64 C library (apt-get install libc6:arm64)" >&2; exit 1; }
cd "$(dirname "$0")/../.."
CGO_ENABLED=0 GOARCH=arm64 PUREMETAL_OBJC_FOUNDATION=none \
	exec go test -count=1 -exec 'qemu-aarch64 -L /' -skip '^Example' "$@" ./objc/
