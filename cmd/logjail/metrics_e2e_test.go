package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestActiveBansMetricAgreesWithList: logjail_active_bans by kind counts
// what `logjail list` shows, a rule's ban and an operator's alike, and
// follows an unban.
func TestActiveBansMetricAgreesWithList(t *testing.T) {
	e := newOpEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.cfg, []byte(strings.Replace(string(cfg), `metrics: ""`, "metrics: "+addr, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.start()

	// scrape returns logjail_active_bans by kind.
	scrape := func() map[string]int {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("metrics: %v", err)
		}
		defer resp.Body.Close()
		got := map[string]int{}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var kind string
			var v float64
			if n, _ := fmt.Sscanf(sc.Text(), "logjail_active_bans{kind=%q} %g", &kind, &v); n == 2 {
				got[kind] = int(v)
			}
		}
		return got
	}
	// agree waits until the metric and list agree on want bans, by kind.
	agree := func(want int) {
		t.Helper()
		var m map[string]int
		var listed map[string]int
		e.waitFor("logjail_active_bans{kind=\"ban\"} and list to agree on "+strconv.Itoa(want)+" bans", func() bool {
			listed = map[string]int{}
			for _, b := range e.list().Bans {
				listed[b.Kind]++
			}
			m = scrape()
			return listed["ban"] == want && m["ban"] == want && m["throttle"] == listed["throttle"]
		})
	}

	e.must(0, "ban", "198.51.100.9", "--for", "1h", "--reason", "by hand") // an operator's
	agree(1)
	e.appendLines("203.0.113.7", 6) // over "5 per 10s": rule flood bans it
	agree(2)
	e.must(0, "unban", "198.51.100.9")
	agree(1)
}
