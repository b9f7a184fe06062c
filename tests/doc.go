// Package tests is puremetal's end-to-end verification of the Gated
// DeltaNet kernels: Metal buffers made through package mtl, dispatches
// encoded by package gdn, command buffers run by a device.
//
// The same suite runs on two kinds of device. Tests named TestEmulated...
// run on the emulated Metal device of package emu, in two scheduling
// orders (the parity suite in three: forward, shuffled and reverse), on
// any system with the GNU Objective-C runtime and clang; strict mode
// (PUREMETAL_STRICT=1) turns a missing prerequisite into a failure. Tests
// named TestMetal... run on the system's GPU; elsewhere than on a Mac they
// skip and say why. On a Mac, run the real-Metal suite with
//
//	go test ./tests/ -run Metal -v
//
// Every kernel is compared with both CPU references of package cpuref and
// with the golden vectors of HF transformers' Qwen3-Next implementation
// (the chunked prefill also with cpuref.Chunked64, the float64 chunked
// form, over 2048 tokens too);
// the decode family's variants are compared with each other byte for
// byte (the decode kernel itself at two tokens or more too, which
// gdn.Kernels.Decode leaves to the seq kernel, encoded through mtl
// directly); on the emulated device the memory traffic of each dispatch is
// measured against the contract's figures.
//
// FuzzDispatch checks validation and dispatch together on random shapes,
// parameters and views, against the contract's rules written out on their
// own. Its seed corpus, and any failing input the fuzzer saved under
// testdata, runs with the rest of the suite, and
//
//	go test ./tests -run '^$' -fuzz FuzzDispatch -fuzztime 5m
//
// searches for more.
package tests
