//go:build !darwin

package kernels

import "github.com/puremetal/puremetal/mtl"

func systemLanguageVersion() mtl.LanguageVersion { return mtl.LanguageVersion3_1 }
