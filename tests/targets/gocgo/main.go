// A Go program with cgo calls both ways, for $ustack across them: Go calls
// C (cLeaf in cfuncs.c, through cgo's wrapper and the runtime's switch to the system
// stack), and C calls back into Go (cCallsBack -> the exported goCallback,
// through crosscall2 and the runtime's switch back to the goroutine's
// stack). Built unstripped and stripped (-s -w): Go's code then has no CFI,
// the C code keeps its .eh_frame.
//
// Usage: gocgo N: N rounds, each calling cLeaf(i) from Go and
// cCallsBack(i) from Go, whose C calls goCallback(i); prints the sums.
package main

/*
#include <stdint.h>

int64_t cLeaf(int64_t x);
int64_t cCallsBack(int64_t x);
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
)

var callbacks int64

//export goCallback
//go:noinline
func goCallback(x C.int64_t) C.int64_t {
	callbacks++
	return x * 2
}

//go:noinline
func callLeaf(i int) int64 {
	return int64(C.cLeaf(C.int64_t(i)))
}

//go:noinline
func callBack(i int) int64 {
	return int64(C.cCallsBack(C.int64_t(i)))
}

func main() {
	n := 3
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	var leaf, back int64
	for i := 1; i <= n; i++ {
		leaf += callLeaf(i)
		back += callBack(i)
	}
	fmt.Printf("leaf %d back %d callbacks %d\n", leaf, back, callbacks)
}
