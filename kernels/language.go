package kernels

import "github.com/puremetal/puremetal/mtl"

// LanguageVersion returns the Metal Shading Language version a [Registry]
// made by [NewRegistry] compiles the kernels as on dev. The sources test
// __METAL_VERSION__: from 3.1 on they read and write bf16 data as MSL's
// bfloat, below it as 16-bit integers converted by hand (the same entry
// points, the same results). MSL 3.1 comes with macOS 14, and its bfloat
// is a type of Apple-silicon GPUs (the Apple7 family and later), not of the
// Intel and AMD GPUs of older Macs. So the answer is 3.1 when the system
// compiles 3.1 (macOS 14 or later, read from the kern.osproductversion
// sysctl; elsewhere the emulated device, which does) and dev supports
// MTLGPUFamilyApple7, and 3.0 otherwise.
func LanguageVersion(dev *mtl.Device) mtl.LanguageVersion {
	return languageFor(systemLanguageVersion(), dev.SupportsFamily(mtl.GPUFamilyApple7))
}

// languageFor returns the kernels' language version on a system that
// compiles up to version system, for a device with (appleGPU) or without
// an Apple-silicon GPU.
func languageFor(system mtl.LanguageVersion, appleGPU bool) mtl.LanguageVersion {
	if system >= mtl.LanguageVersion3_1 && appleGPU {
		return mtl.LanguageVersion3_1
	}
	return mtl.LanguageVersion3_0
}

// macOSLanguage returns the newest language version the kernels use that a
// macOS product version ("13.6.1", "14.0") compiles: 3.1 from 14 on, 3.0
// below or when the version cannot be read.
func macOSLanguage(product string) mtl.LanguageVersion {
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
