// Command logjail-eval prints the labelled evaluation of the default
// configuration (package eval): one row per log, a total row, the good
// clients banned and the goals' status. scripts/eval.sh runs it.
//
// Usage: logjail-eval [-shared DIR] [-labels DIR] [-config FILE] [-v]
//
//	logjail-eval -write DIR
//
// -config evaluates another configuration file instead of the embedded
// example (to try a variant of the defaults); -v lists, after the table,
// every attacker banned (by which rule, after how many requests) or missed.
// -write writes the generated scenarios into DIR (NAME.log and its truth,
// NAME.labels.yaml), to replay with `logjail replay`, and evaluates nothing.
//
// Without the shared directory (../shared beside the repository) it
// evaluates the generated scenarios alone and says so on stderr.
//
// Boundaries: It prints what package eval computes and decides nothing
// itself; it never acts (no database, no actions).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"

	"github.com/logjail/logjail/eval"
)

func main() {
	shared := flag.String("shared", "../shared", "the shared directory (corpus/real, tools/genlog.py)")
	labels := flag.String("labels", "testdata/eval/labels", "the labels of the real logs")
	config := flag.String("config", "", "a configuration file to evaluate instead of the embedded example")
	verbose := flag.Bool("v", false, "list every attacker's outcome after the table")
	write := flag.String("write", "", "write the generated scenarios and their truth into this directory, and stop")
	flag.Parse()
	if *write != "" {
		if _, err := eval.Scenarios(*write); err != nil {
			fmt.Fprintln(os.Stderr, "logjail-eval:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, *shared, *labels, *config, *verbose)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "logjail-eval:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, shared, labels, config string, verbose bool) error {
	python := ""
	if _, err := os.Stat(shared); err != nil {
		fmt.Fprintf(os.Stderr, "logjail-eval: no %s: the real logs and genlog are left out, the scenarios alone are evaluated\n", shared)
		shared = ""
	} else if python, err = exec.LookPath("python3"); err != nil {
		return fmt.Errorf("genlog.py needs python3: %w", err)
	}
	cfg, err := eval.Config()
	if config != "" {
		cfg, err = eval.LoadConfig(config)
	}
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "logjail-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rows, err := eval.All(ctx, cfg, python, shared, labels, dir)
	if err != nil {
		return err
	}
	if err := eval.WriteTable(os.Stdout, rows); err != nil {
		return err
	}
	if verbose {
		return eval.WriteOutcomes(os.Stdout, rows)
	}
	return nil
}
