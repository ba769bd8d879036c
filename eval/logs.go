package eval

import (
	"context"

	"bytes"
	"encoding/json"
	"fmt"
	"github.com/logjail/logjail/rules"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/logjail/logjail/internal/evalgen"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/source"
	"gopkg.in/yaml.v3"
)

// RealLog is one real log of ../shared/corpus/real and its labels file
// (testdata/eval/labels/Name.yaml).
type RealLog struct {
	Name  string
	Files []string // relative to corpus/real; globs
}

// RealLogs are the real logs evaluated.
var realLogs = []RealLog{
	{"elastic-apache_logs.log", []string{"elastic-apache_logs.log"}},
	{"ployt0-nginx-bots-access.log", []string{"ployt0-nginx-bots-access.log"}},
	{"honeynet-redhat-httpd", []string{"honeynet-redhat-httpd/access_log*"}},
}

// labelsFile is the YAML form of testdata/eval/labels/*.yaml.
type labelsFile struct {
	Clients []labelEntry `yaml:"clients"`
}

type labelEntry struct {
	Addr  string `yaml:"addr"`
	Label string `yaml:"label"`
	Why   string `yaml:"why"`
}

// LoadLabels reads a labels file: every client an address or a prefix,
// labelled attacker or good, with a why. An error names the file, the
// line and the field.
func LoadLabels(path string) ([]Truth, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lf labelsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&lf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The lines of the clients, for the errors below.
	var doc struct {
		Clients []yaml.Node `yaml:"clients"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seen := map[netip.Prefix]bool{}
	out := make([]Truth, 0, len(lf.Clients))
	for i, c := range lf.Clients {
		at := fmt.Sprintf("%s:%d: clients[%d]", path, doc.Clients[i].Line, i)
		p, err := parsePrefix(c.Addr)
		if err != nil {
			return nil, fmt.Errorf("%s.addr: %w", at, err)
		}
		if seen[p] {
			return nil, fmt.Errorf("%s.addr: %s labelled twice", at, p)
		}
		seen[p] = true
		if c.Label != "attacker" && c.Label != "good" {
			return nil, fmt.Errorf("%s.label: %q: want attacker or good", at, c.Label)
		}
		if c.Why == "" {
			return nil, fmt.Errorf("%s.why: empty: say what it sent", at)
		}
		out = append(out, Truth{Prefix: p, Attacker: c.Label == "attacker", Why: c.Why})
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// RealLogs returns the real logs under shared/corpus/real with their
// labels from labelsDir; an error names a missing log.
func RealLogs(shared, labelsDir string) ([]Log, error) {
	var out []Log
	for _, r := range realLogs {
		var files []string
		for _, g := range r.Files {
			m, err := filepath.Glob(filepath.Join(shared, "corpus", "real", g))
			if err != nil {
				return nil, err
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("%s: not found under %s", g, filepath.Join(shared, "corpus", "real"))
			}
			files = append(files, m...)
		}
		truth, err := LoadLabels(filepath.Join(labelsDir, r.Name+".yaml"))
		if err != nil {
			return nil, err
		}
		out = append(out, Log{Name: r.Name, Files: files, Truth: truth})
	}
	return out, nil
}

// Scenarios writes internal/evalgen's scenarios into dir, each as
// NAME.log and its truth as NAME.labels.yaml (the labels format, which
// LoadLabels reads), and returns them as logs with their truth.
func Scenarios(dir string) ([]Log, error) {
	var out []Log
	for _, s := range evalgen.Scenarios() {
		path := filepath.Join(dir, s.Name+".log")
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		err = s.Write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		lg := Log{Name: "scenario/" + s.Name, Files: []string{path}}
		for _, c := range s.Truth {
			lg.Truth = append(lg.Truth, Truth{Prefix: netip.PrefixFrom(c.Addr, c.Addr.BitLen()), Attacker: c.Attacker, Why: c.Why})
		}
		if err := writeLabels(filepath.Join(dir, s.Name+".labels.yaml"), s.Name, lg.Truth); err != nil {
			return nil, err
		}
		out = append(out, lg)
	}
	return out, nil
}

// GenlogArgs are genlog.py's arguments for the evaluation's log.
var genlogArgs = []string{"--lines", "200000", "--seed", "7", "--attackers", "12", "--format", "combined"}

// Genlog runs python3 shared/tools/genlog.py into dir and returns its log:
// the truth file's attackers are attackers (each by its key: an address,
// or a prefix for a spread attack), every other client of the log is good.
func Genlog(python, shared, dir string) (Log, error) {
	tool := filepath.Join(shared, "tools", "genlog.py")
	log, tf := filepath.Join(dir, "genlog.log"), filepath.Join(dir, "genlog.truth.json")
	args := append([]string{tool}, genlogArgs...)
	args = append(args, "--truth", tf, "-o", log)
	if out, err := exec.Command(python, args...).CombinedOutput(); err != nil {
		return Log{}, fmt.Errorf("genlog.py: %w\n%s", err, out)
	}
	raw, err := os.ReadFile(tf)
	if err != nil {
		return Log{}, err
	}
	var tr struct {
		Attackers []struct {
			Key  string   `json:"key"`
			IPs  []string `json:"ips"`
			Kind string   `json:"kind"`
		} `json:"attackers"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		return Log{}, fmt.Errorf("%s: %w", tf, err)
	}
	lg := Log{Name: "genlog", Files: []string{log}}
	bad := map[netip.Addr]bool{}
	for i, a := range tr.Attackers {
		for _, s := range a.IPs {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				return Log{}, fmt.Errorf("%s: attackers[%d].ips: %w", tf, i, err)
			}
			bad[ip] = true
			lg.Truth = append(lg.Truth, Truth{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Attacker: true,
				Why: "genlog " + a.Kind + " attacker (key " + a.Key + ")"})
		}
	}
	// Every other client is good: read the log's addresses.
	l, err := source.OpenLog(log, parser.Options{Format: "combined"}, nil)
	if err != nil {
		return Log{}, err
	}
	defer l.Close()
	n := map[netip.Addr]int{}
	for {
		text, i, ok := l.Lines.Next()
		if !ok {
			break
		}
		if e, err := l.Parser.ParseString(text, i); err == nil && !bad[e.IP] {
			n[e.IP]++
		}
	}
	if err := l.Lines.Err(); err != nil {
		return Log{}, err
	}
	good := make([]netip.Addr, 0, len(n))
	for a := range n {
		good = append(good, a)
	}
	slices.SortFunc(good, netip.Addr.Compare)
	for _, a := range good {
		lg.Truth = append(lg.Truth, Truth{Prefix: netip.PrefixFrom(a, a.BitLen()), Why: "genlog normal client, " + strconv.Itoa(n[a]) + " requests"})
	}
	return lg, nil
}

// All evaluates every log under cfg, in order: the real logs (when shared
// is not ""), the scenarios, and genlog's (when shared is not ""). dir
// receives the generated logs.
func All(ctx context.Context, cfg *rules.Config, python, shared, labelsDir, dir string) ([]Row, error) {
	var logs []Log
	if shared != "" {
		real, err := RealLogs(shared, labelsDir)
		if err != nil {
			return nil, err
		}
		logs = append(logs, real...)
	}
	sc, err := Scenarios(dir)
	if err != nil {
		return nil, err
	}
	logs = append(logs, sc...)
	if shared != "" {
		g, err := Genlog(python, shared, dir)
		if err != nil {
			return nil, err
		}
		logs = append(logs, g)
	}
	rows := make([]Row, 0, len(logs))
	for _, lg := range logs {
		r, err := Evaluate(ctx, cfg, lg)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// writeLabels writes truth in the labels format.
func writeLabels(path, name string, truth []Truth) error {
	var lf labelsFile
	for _, tr := range truth {
		label := "good"
		if tr.Attacker {
			label = "attacker"
		}
		addr := tr.Prefix.String()
		if tr.Prefix.IsSingleIP() {
			addr = tr.Prefix.Addr().String()
		}
		lf.Clients = append(lf.Clients, labelEntry{Addr: addr, Label: label, Why: tr.Why})
	}
	data, err := yaml.Marshal(&lf)
	if err != nil {
		return err
	}
	head := "# The truth of the generated scenario " + name + " (internal/evalgen).\n"
	return os.WriteFile(path, append([]byte(head), data...), 0o644)
}
