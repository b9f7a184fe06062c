package kernels

import (
	"sync"
	"syscall"

	"github.com/puremetal/puremetal/mtl"
)

var osLanguage = sync.OnceValue(func() mtl.LanguageVersion {
	product, err := syscall.Sysctl("kern.osproductversion")
	if err != nil {
		return mtl.LanguageVersion3_0
	}
	return macOSLanguage(product)
})

func systemLanguageVersion() mtl.LanguageVersion { return osLanguage() }
