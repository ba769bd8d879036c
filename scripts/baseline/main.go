// Command baseline is the reference the replay benchmark is read against: a
// plain Go loop that only cuts out the client address and the time of each
// line and counts them per (address, second). scripts/bench.sh times it on
// the same generated log as logjail replay, so that a figure taken on a
// busy machine can be read as a ratio.
//
//	go run ./scripts/baseline access.log
//
// Boundaries: It imports nothing of logjail's, so that it measures the
// machine, not the code it is compared with.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: baseline ACCESS_LOG")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	counts := map[string]int{}
	lines := 0
	for sc.Scan() {
		l := sc.Bytes()
		sp, open, end := bytes.IndexByte(l, ' '), bytes.IndexByte(l, '['), bytes.IndexByte(l, ']')
		if sp < 0 || open < 0 || end < open {
			continue
		}
		counts[string(l[:sp])+"|"+string(l[open+1:end])]++
		lines++
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d lines, %d (address, second) pairs\n", lines, len(counts))
}
