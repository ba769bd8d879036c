package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/logjail/logjail/internal/evalgen"
	"github.com/logjail/logjail/parser"
	"github.com/logjail/logjail/rules"
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
var genlogArgs = []string{"--lines", "200000", "--seed", "7", "--attackers", "12"}

// Genlog runs python3 shared/tools/genlog.py into dir and returns its log:
// the truth file's attackers are attackers (each by its key: an address,
// or a prefix for a spread attack), every other client of the log is good.
// With cpu, the log is combined_cpu and every attacker is labelled;
// without, it is combined and the `cpu` attackers, invisible there, are
// not labelled at all (see the package doc).
func Genlog(python, shared, dir string, cpu bool) (Log, error) {
	tool := filepath.Join(shared, "tools", "genlog.py")
	name, format := "genlog", "combined"
	if cpu {
		name, format = "genlog+cpu", "combined_cpu"
	}
	log, tf := filepath.Join(dir, name+".log"), filepath.Join(dir, name+".truth.json")
	args := append([]string{tool}, genlogArgs...)
	args = append(args, "--format", format, "--truth", tf, "-o", log)
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
	lg := Log{Name: name, Files: []string{log}, CPU: cpu}
	bad := map[netip.Addr]bool{}
	for i, a := range tr.Attackers {
		for _, s := range a.IPs {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				return Log{}, fmt.Errorf("%s: attackers[%d].ips: %w", tf, i, err)
			}
			bad[ip] = true
			if a.Kind == "cpu" && !cpu {
				continue
			}
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
		for _, cpu := range []bool{false, true} {
			g, err := Genlog(python, shared, dir, cpu)
			if err != nil {
				return nil, err
			}
			logs = append(logs, g)
		}
	}
	var cpuCfg *rules.Config
	rows := make([]Row, 0, len(logs))
	for _, lg := range logs {
		c := cfg
		if lg.CPU {
			if cpuCfg == nil {
				if cpuCfg, err = CPUConfig(cfg); err != nil {
					return nil, err
				}
			}
			c = cpuCfg
		}
		r, err := Evaluate(ctx, c, lg)
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

// CPUConfig is cfg as the example tells a user whose log carries CPU
// seconds to change it: the source reads the example's commented
// log_format (combined + rt= and cpu=) with its commented cpu_field, and
// the commented `heavy` rule is switched on. cfg is the embedded example
// (File "example.yaml") or a file holding the same commented lines.
func CPUConfig(cfg *rules.Config) (*rules.Config, error) {
	text := rules.Example()
	if cfg.File != "example.yaml" {
		var err error
		if text, err = os.ReadFile(cfg.File); err != nil {
			return nil, err
		}
	}
	lines := strings.Split(string(text), "\n")
	var logFormat, cpuField string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(t, "# log_format: "); ok && logFormat == "" {
			logFormat = v
		}
		if v, ok := strings.CutPrefix(t, "# cpu_field: "); ok && cpuField == "" {
			cpuField, _, _ = strings.Cut(v, " ")
		}
	}
	swapped, heavy := false, false
	for i := 0; i < len(lines); i++ {
		switch {
		case !swapped && strings.TrimSpace(lines[i]) == "format: combined":
			indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " "))]
			lines[i] = indent + "log_format: " + logFormat + "\n" + indent + "cpu_field: " + cpuField
			swapped = true
		case lines[i] == "  # - name: heavy":
			for ; i < len(lines) && strings.HasPrefix(lines[i], "  # "); i++ {
				lines[i] = "  " + lines[i][len("  # "):]
			}
			heavy = true
		}
	}
	if logFormat == "" || cpuField == "" || !swapped || !heavy {
		return nil, fmt.Errorf("%s: no commented log_format, cpu_field and heavy rule to switch on", cfg.File)
	}
	return rules.Parse(cfg.File+" (CPU variant)", []byte(strings.Join(lines, "\n")), configOptions())
}
