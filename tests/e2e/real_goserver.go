// A net/http server for uscope's real-program tests (tests/e2e/test_real_go.py),
// built by them with Debian's golang-go, unstripped and stripped (-s -w).
//
// `goserver PORT` listens on 127.0.0.1:PORT and prints "listening PORT".
// GET /u/NAME?id=N calls process(N, NAME), which calls compute(N) and, for
// every fourth id, sleeps 200 to 800 us (the goroutine blocks: it may go on
// on another OS thread), then answers len(NAME) + N. The server counts the
// calls it served and times each process() from inside it: GET /stats
// answers {"served": N, "took": {"ID": NS, ...}}.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	mu     sync.Mutex
	served int
	took   = map[string]int64{}
)

// compute never blocks: a loop over its argument.
//
//go:noinline
func compute(n int) int {
	s := 0
	for i := 0; i <= n%64; i++ {
		s += i * n
	}
	return s
}

// process(id, name): id in RAX, name in RBX (pointer) and RCX (length).
//
//go:noinline
func process(id int, name string) int {
	start := time.Now()
	compute(id)
	if id%4 == 0 {
		time.Sleep(time.Duration(200+id%7*100) * time.Microsecond)
	}
	n := len(name) + id
	d := time.Since(start).Nanoseconds()
	mu.Lock()
	served++
	took[strconv.Itoa(id)] = d
	mu.Unlock()
	return n
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	http.HandleFunc("/u/", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.Atoi(r.URL.Query().Get("id"))
		name := strings.TrimPrefix(r.URL.Path, "/u/")
		fmt.Fprintf(w, "%d\n", process(id, name))
	})
	http.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"served": served, "took": took})
	})
	fmt.Printf("listening %s\n", os.Args[1])
	os.Stdout.Sync()
	http.Serve(ln, nil)
}
