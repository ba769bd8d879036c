package rules

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestFleetScope: with a fleet: section a rule is fleet-wide by default
// when the fleet can sum every limit of it (rates, shares), per node
// otherwise or when it says scope: node; without one, every rule is per
// node.
func TestFleetScope(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "redis.pass"), []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const rulesPart = `
sources:
  - {name: web, paths: [/var/log/nginx/access.log], cpu_fallback: duration}
ranges:
  crawlers:
    cidrs: [198.51.100.0/24]
    group: true
    limits: ["50 per second"]
  slow:
    cidrs: [203.0.113.0/24]
    limits: ["last 5 within 1s"]
rules:
  - name: flood
    limits: ["10 per second", "300 per minute"]
  - name: heavy
    limits: ["25% cpu over 15s"]
  - name: burst
    limits: ["4/s burst 150"]
  - name: mixed
    limits: ["10 per second", "last 3 within 1s"]
  - name: local
    limits: ["10 per second"]
    scope: node
`
	fleet := `
fleet:
  redis: redis://127.0.0.1:6379/0
  password_file: redis.pass
  node: web-1.example
`
	for _, tc := range []struct {
		name  string
		conf  string
		fleet *Fleet
		want  map[string]bool
	}{
		{"fleet", fleet + rulesPart,
			&Fleet{Redis: "redis://127.0.0.1:6379/0", PasswordFile: filepath.Join(dir, "redis.pass"), Node: "web-1.example", Sync: 200 * time.Millisecond, Line: 2},
			map[string]bool{"flood": true, "heavy": true, "burst": false, "mixed": false, "local": false, "range:crawlers": true, "range:slow": false, GoodBotsRule: true}},
		{"alone", rulesPart, nil,
			map[string]bool{"flood": false, "heavy": false, "burst": false, "mixed": false, "local": false, "range:crawlers": false, "range:slow": false, GoodBotsRule: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(filepath.Join(dir, "logjail.yaml"), []byte(tc.conf), testOptions)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.fleet, c.Fleet); diff != "" {
				t.Errorf("Fleet (-want +got):\n%s", diff)
			}
			got := map[string]bool{}
			for _, r := range c.Rules {
				got[r.Name] = r.Fleet
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rules' Fleet (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFleetDefaults: node is the host name, sync 200ms, rediss:// is
// accepted with a CA file; the section is comparable, as a reload
// compares it.
func TestFleetDefaults(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := "sources: [{name: web, paths: [/var/log/nginx/access.log]}]\n" +
		"fleet: {redis: \"rediss://:pw@redis.example:6380/2\", ca_file: " + ca + ", sync: 50ms}\n"
	c, err := Parse(filepath.Join(dir, "logjail.yaml"), []byte(conf), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	want := Fleet{Redis: "rediss://:pw@redis.example:6380/2", CAFile: ca, Node: host, Sync: 50 * time.Millisecond, Line: 2}
	if *c.Fleet != want {
		t.Errorf("Fleet %+v, want %+v", *c.Fleet, want)
	}
}

// TestFleetCluster: cluster: true names a Redis Cluster; the addrs: list
// joins the URL's own addr= seeds as addr= parameters (one comparable
// value); TLS, the CA and the password file are as for one Redis.
func TestFleetCluster(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"redis.pass", "ca.pem"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const sources = "sources: [{name: web, paths: [/var/log/nginx/access.log]}]\n"
	for _, tc := range []struct {
		name, fleet string
		want        Fleet
	}{
		{"seed alone", "fleet:\n  redis: redis://10.0.0.1:6379\n  cluster: true\n  node: web1\n",
			Fleet{Redis: "redis://10.0.0.1:6379", Cluster: true, Node: "web1", Sync: DefaultFleetSync, Line: 2}},
		{"addrs", "fleet:\n  redis: redis://10.0.0.1:6379/0\n  cluster: true\n  addrs: [10.0.0.2:6379, \"[2001:db8::3]:6379\"]\n  node: web1\n",
			Fleet{Redis: "redis://10.0.0.1:6379/0?addr=10.0.0.2%3A6379&addr=%5B2001%3Adb8%3A%3A3%5D%3A6379", Cluster: true, Node: "web1", Sync: DefaultFleetSync, Line: 2}},
		{"addr= and addrs, TLS", "fleet:\n  redis: rediss://redis1.example:6380?addr=redis2.example:6380\n  cluster: true\n  addrs: [redis3.example:6380]\n" +
			"  password_file: redis.pass\n  ca_file: ca.pem\n  node: web1\n",
			Fleet{Redis: "rediss://redis1.example:6380?addr=redis2.example%3A6380&addr=redis3.example%3A6380", Cluster: true,
				PasswordFile: filepath.Join(dir, "redis.pass"), CAFile: filepath.Join(dir, "ca.pem"), Node: "web1", Sync: DefaultFleetSync, Line: 2}},
		{"one Redis", "fleet:\n  redis: redis://10.0.0.1:6379/3\n  cluster: false\n  node: web1\n",
			Fleet{Redis: "redis://10.0.0.1:6379/3", Node: "web1", Sync: DefaultFleetSync, Line: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse(filepath.Join(dir, "logjail.yaml"), []byte(sources+tc.fleet), testOptions)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *c.Fleet); diff != "" {
				t.Errorf("Fleet (-want +got):\n%s", diff)
			}
		})
	}
}
