package objc_test

import (
	"fmt"
	"log"

	"github.com/puremetal/puremetal/objc"
)

func ExampleNewNSString() {
	str, err := objc.NewNSString("Grüße aus Go 🚀")
	if err != nil {
		log.Fatal(err)
	}
	defer str.Release()
	fmt.Println(objc.GoString(str))
	// [str length] counts UTF-16 units: the rocket takes two.
	fmt.Println(str.SendWord(objc.RegisterName("length")))

	_, err = objc.NewNSString("a\x00b")
	fmt.Println(err)
	// Output:
	// Grüße aus Go 🚀
	// 15
	// objc: string of 3 bytes has a NUL byte at offset 1; an NSString cannot be made from it
}

func ExampleWithAutoreleasePool() {
	objc.WithAutoreleasePool(func() {
		// A string handed to the pool lives until the pool drains.
		str, err := objc.NewNSString("pool-scoped")
		if err != nil {
			log.Fatal(err)
		}
		str.Autorelease()
		fmt.Println(objc.GoString(str))
	})
	// Output: pool-scoped
}

// MTLSize as a Go method receives it.
type size struct{ Width, Height, Depth uint64 }

func ExampleRegisterClass() {
	cls, err := objc.RegisterClass("ExampleGrid", objc.GetClass("NSObject"), []objc.Method{{
		Sel:   "threadsIn:times:",
		Types: "Q@:{MTLSize=QQQ}Q",
		Fn: func(self objc.ID, sel objc.SEL, grid size, n uint64) uint64 {
			return grid.Width * grid.Height * grid.Depth * n
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	grid := cls.New()
	defer grid.Release()
	n := objc.SendArgs(grid, objc.RegisterName("threadsIn:times:"), objc.Struct24(64, 4, 2), objc.Word(3))
	fmt.Println(cls.Name(), n)
	// Output: ExampleGrid 1536
}
