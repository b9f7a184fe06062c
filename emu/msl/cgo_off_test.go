//go:build !cgo

package msl

const cgoEnabled = false
