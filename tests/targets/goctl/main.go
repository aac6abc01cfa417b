// uscope e2e and unit-test target: a Go program, built unstripped and
// stripped (-ldflags='-s -w': no .symtab, no DWARF; only Go's .gopclntab
// names its functions). `goctl [N]` runs N rounds (default 5) of
// add(total, scale(i, 3)) and step(i, c), which calls
// c.syncDeployment("deploy-<i>", i), then prints "total T syncs N".
package main

import (
	"fmt"
	"os"
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
	}
	fmt.Println("total", total, "syncs", c.syncs)
}
