package kernels

import "github.com/puremetal/puremetal/mtl"

// LanguageVersion returns the Metal Shading Language version a [Registry]
// made by [NewRegistry] compiles the kernels as on this system. MSL has the
// bfloat type from version 3.1 on, which macOS 14 and later compile; the
// sources test __METAL_VERSION__ and, below 3.1, read and write bf16 data as
// 16-bit integers converted by hand (the same entry points, the same
// results). On macOS the answer is 3.1 from macOS 14 on and 3.0 before
// (read from the kern.osproductversion sysctl); elsewhere, where only the
// emulated device runs the kernels, it is 3.0.
func LanguageVersion() mtl.LanguageVersion { return systemLanguageVersion() }

// languageFor returns the language version for a macOS product version
// ("13.6.1", "14.0"): 3.1 from 14 on, 3.0 below or when it cannot be read.
func languageFor(product string) mtl.LanguageVersion {
	major := 0
	for _, c := range product {
		if c < '0' || c > '9' {
			break
		}
		major = major*10 + int(c-'0')
		if major > 1000 {
			break
		}
	}
	if major >= 14 {
		return mtl.LanguageVersion3_1
	}
	return mtl.LanguageVersion3_0
}
