package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/logjail/logjail/control"
)

// TestBouncersCommands: `logjail bouncers` without and with the daemon, the
// daemon's crowdsec action serving the keys it makes, status showing the
// last pull, and a bouncer's delta over a restart of the daemon holding
// an unban made while it was down.
func TestBouncersCommands(t *testing.T) {
	e := newOpEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	cfg := fmt.Sprintf(`state_dir: %[1]s/state
control_socket: %[1]s/run/control.sock
metrics: ""
sources:
  - {name: web, paths: [%[1]s/access.log], format: combined}
rules:
  - {name: flood, limits: ["5 per 10s"], ban: {for: 1h}}
actions:
  - type: crowdsec
    listen: %[2]s
`, e.dir, listen)
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	hexKey := regexp.MustCompile(`^[0-9a-f]{64}\n$`)
	key := e.must(0, "bouncers", "add", "fw")
	if !hexKey.MatchString(key) {
		t.Fatalf("bouncers add printed %q, want a key of 64 hex digits alone", key)
	}
	key = strings.TrimSpace(key)
	e.must(2, "bouncers", "add", "fw")
	e.must(2, "bouncers", "add", "bad name")
	e.must(1, "bouncers", "delete", "nobody")
	var bl control.BouncerList
	if err := json.Unmarshal([]byte(e.must(0, "bouncers", "list", "-o", "json")), &bl); err != nil || len(bl.Bouncers) != 1 || bl.Bouncers[0].Name != "fw" || bl.Bouncers[0].LastPull != nil {
		t.Fatalf("bouncers list: %+v %v", bl, err)
	}

	pull := func(key, query string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+listen+"/v1/decisions/stream"+query, nil)
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("User-Agent", "crowdsec-firewall-bouncer/test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	e.start()
	if code, body := pull(key, "?startup=true"); code != 200 || body != `{"new":[],"deleted":[]}` {
		t.Fatalf("startup: %d %s", code, body)
	}
	e.must(0, "ban", "198.51.100.7", "--for", "1h")
	if code, body := pull(key, ""); code != 200 || !strings.Contains(body, `"value":"198.51.100.7"`) || !strings.Contains(body, `"deleted":[]`) {
		t.Fatalf("delta after a ban: %d %s", code, body)
	}
	live := strings.TrimSpace(e.must(0, "bouncers", "add", "live"))
	if code, body := pull(live, "?startup=true"); code != 200 || !strings.Contains(body, "198.51.100.7") {
		t.Fatalf("a key added through the daemon: %d %s", code, body)
	}
	st := e.must(0, "status")
	if !strings.Contains(st, "bouncers:") || !regexp.MustCompile(`fw: last pull \d{4}-\d\d-\d\d \d\d:\d\d:\d\d from 127\.0\.0\.1 \(crowdsec-firewall-bouncer/test\)`).MatchString(st) {
		t.Errorf("status does not show fw's last pull:\n%s", st)
	}
	e.must(0, "bouncers", "delete", "fw")
	if code, body := pull(key, ""); code != http.StatusForbidden || body != `{"message":"access forbidden"}` {
		t.Errorf("a deleted key: %d %s, want 403", code, body)
	}

	// Down: an operator lifts the ban on the database; the bouncer's next
	// delta after the restart has it deleted.
	e.stop()
	e.must(0, "unban", "198.51.100.7")
	e.start()
	code, body := pull(live, "")
	if code != 200 || !strings.Contains(body, `"new":[]`) || !strings.Contains(body, `"deleted":[{`) || !strings.Contains(body, "198.51.100.7") {
		t.Errorf("delta after a restart with an unban made while down: %d %s", code, body)
	}
	e.stop()
}
