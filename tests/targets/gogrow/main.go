// uscope e2e target: return probes on Go functions whose goroutine stacks
// grow during the probed calls. `gogrow [ROUNDS]` runs grow(50+r) + square(r)
// on a new goroutine per round and prints "total T".
package main

import (
	"fmt"
	"os"
	"strconv"
)

// grow recurses with a 4 KiB frame, so the goroutine's stack is copied
// (grown) several times while calls of grow are in progress.
//
//go:noinline
func grow(n int) int {
	var buf [4096]byte
	buf[n%4096] = byte(n)
	if n == 0 {
		return int(buf[0]) + 1
	}
	return grow(n-1) + int(buf[n%4096])
}

//go:noinline
func square(x int) int { return x * x }

func main() {
	rounds := 3
	if len(os.Args) > 1 {
		rounds, _ = strconv.Atoi(os.Args[1])
	}
	total := 0
	done := make(chan int)
	for r := 0; r < rounds; r++ {
		go func(r int) { done <- grow(50+r) + square(r) }(r)
		total += <-done
	}
	fmt.Println("total", total)
}
