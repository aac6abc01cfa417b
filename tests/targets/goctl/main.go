// uscope e2e and unit-test target: a Go program, built unstripped and
// stripped (-ldflags='-s -w': no .symtab, no DWARF; only Go's .gopclntab
// names its functions). `goctl [N]` runs N rounds (default 5) of
// add(total, scale(i, 3)) and step(i, c), which calls
// c.syncDeployment("deploy-<i>", i), then prints "total T syncs N".
// Each round also calls tally(squares, label) with the squares 1..i (len i,
// cap i+1), divmod(total, 7) (two results), and check(err, v): err nil in
// odd rounds, a *main.roundError in even ones, v the round as an int. Then a
// goroutine runs worker(N) and prints "worker goroutine G" (its goid).
package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
)

type Controller struct {
	name  string
	syncs int
}

// A method on a pointer receiver: main.(*Controller).syncDeployment. Its
// string parameter comes in two registers (rbx, rcx), replicas in rdi.
//
//go:noinline
func (c *Controller) syncDeployment(key string, replicas int) int {
	c.syncs++
	return len(key) + replicas*c.syncs
}

// Leaves without a frame: a, b (x, factor) in rax and rbx from the entry.
//
//go:noinline
func add(a, b int) int { return a + b }

//go:noinline
func scale(x, factor int) int { return x * factor }

// step has a frame and a stack check (Go's prologue): i in rax, c in rbx.
//
//go:noinline
func step(i int, c *Controller) int {
	return c.syncDeployment("deploy-"+strconv.Itoa(i), i)
}

// A slice (rax, rbx, rcx) and a string (rdi, rsi) in registers.
//
//go:noinline
func tally(xs []int, label string) int {
	sum := 0
	for _, x := range xs {
		sum += x
	}
	return sum + len(label)
}

// Two results: rax and rbx.
//
//go:noinline
func divmod(a, b int) (int, int) { return a / b, a % b }

type roundError struct{ round int }

func (e *roundError) Error() string { return "round " + strconv.Itoa(e.round) }

// An interface (itab, data) and an empty interface (type, data).
//
//go:noinline
func check(err error, v any) bool { return err == nil && v != nil }

// Runs on its own goroutine.
//
//go:noinline
func worker(n int) int { return len(strconv.Itoa(n)) + n }

// The goroutine's id, from the header of its stack trace.
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return string(bytes.Fields(buf)[1])
}

func main() {
	n := 5
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	c := &Controller{name: "ctl"}
	total := 0
	for i := 1; i <= n; i++ {
		total = add(total, scale(i, 3))
		total += step(i, c)
		squares := make([]int, 0, i+1)
		for k := 1; k <= i; k++ {
			squares = append(squares, k*k)
		}
		tally(squares, "round")
		divmod(total, 7)
		var err error
		if i%2 == 0 {
			err = &roundError{i}
		}
		check(err, i)
	}
	fmt.Println("total", total, "syncs", c.syncs)
	done := make(chan string)
	go func() {
		worker(n)
		done <- goid()
	}()
	fmt.Println("worker goroutine", <-done)
}
