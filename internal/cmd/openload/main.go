// Command openload sends HTTP requests at a fixed rate (open loop) and
// prints their latency from each one's due time (package
// internal/openload): scripts/bench-endpoint.sh's load on /auth.
//
//	openload -url http://127.0.0.1:7390/auth -rate 2000 -duration 10s \
//	  -header X-Forwarded-For -values clients.txt
//
// It prints one line of key=value pairs (openload.Result.Line) on stdout
// and a summary on stderr; it exits 1 when a request failed or went
// unanswered, 2 on a usage error.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"time"

	"github.com/logjail/logjail/internal/openload"
)

func main() {
	var o openload.Options
	var values string
	flag.StringVar(&o.URL, "url", "", "target, http://HOST:PORT/PATH")
	flag.Float64Var(&o.Rate, "rate", 2000, "requests a second")
	flag.DurationVar(&o.Duration, "duration", 10*time.Second, "how long requests fall due")
	flag.IntVar(&o.Conns, "conns", 64, "keep-alive connections")
	flag.StringVar(&o.Header, "header", "", "a header sent with every request, its value from -values in turn")
	flag.StringVar(&values, "values", "", "file of the header's values, one a line")
	flag.DurationVar(&o.Drain, "drain", 2*time.Second, "how long answers are waited for after the last due time")
	flag.Parse()
	if o.URL == "" || flag.NArg() > 0 || (o.Header == "") != (values == "") {
		fmt.Fprintln(os.Stderr, "usage: openload -url URL [-rate N] [-duration D] [-conns N] [-header NAME -values FILE] [-drain D]")
		os.Exit(2)
	}
	if values != "" {
		vs, err := readLines(values)
		if err != nil {
			fmt.Fprintln(os.Stderr, "openload:", err)
			os.Exit(2)
		}
		o.Values = vs
	}
	// The pacing goroutine holds a P while it sleeps (a raw nanosleep):
	// the connections' goroutines need others, also on one core.
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 4))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := openload.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "openload: %d due at %g/s over %s on %d connections: %d sent, %d answered, %d errors\n",
		res.Due, o.Rate, o.Duration, o.Conns, res.Sent, res.Answered, res.Errors)
	fmt.Fprintf(os.Stderr, "  latency from the due time: p50 %s  p90 %s  p99 %s  p99.9 %s  max %s (sender's own lag: p99 %s, max %s)\n",
		res.Percentile(50), res.Percentile(90), res.Percentile(99), res.Percentile(99.9), res.Percentile(100), res.LagPercentile(99), res.LagPercentile(100))
	fmt.Println(res.Line(o))
	if res.Answered < res.Due {
		os.Exit(1)
	}
}

// readLines is the file's non-empty lines.
func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no value", path)
	}
	return out, nil
}
