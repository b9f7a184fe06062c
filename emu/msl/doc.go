// Package msl runs Metal Shading Language compute kernels on the CPU.
package msl
