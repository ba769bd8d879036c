package rules

import (
	"strings"
	"testing"
)

// TestWarnings: metrics on a non-loopback address and an endpoint with
// allow_remote on a public or every address load, with a warning naming
// line and path and how to silence it; `silence:` silences each; loopback
// and private addresses warn of nothing.
func TestWarnings(t *testing.T) {
	const base = "sources: [{name: web, paths: [/var/log/a.log]}]\n"
	tests := []struct {
		name, text string
		want       []string // each warning's whole message, in order
	}{
		{"defaults", "", nil},
		{"metrics loopback", "metrics: 127.0.0.1:9390\n", nil},
		{"metrics localhost", "metrics: localhost:9390\n", nil},
		{"metrics ipv6 loopback", "metrics: '[::1]:9390'\n", nil},
		{"metrics every address", "metrics: 0.0.0.0:9390\n",
			[]string{`test.yaml:2: metrics: "0.0.0.0:9390" is not a loopback address: /metrics tells whoever reaches it the keys, rules and bans; listen on 127.0.0.1, or add metrics_remote to silence: if it is intended`}},
		{"metrics no host", "metrics: ':9390'\n", []string{`test.yaml:2: metrics: ":9390" is not a loopback address`}},
		{"metrics private", "metrics: 10.1.2.3:9390\n", []string{`test.yaml:2: metrics: "10.1.2.3:9390" is not a loopback address`}},
		{"metrics silenced", "metrics: 0.0.0.0:9390\nsilence: [metrics_remote]\n", nil},
		{"endpoint public", "actions:\n  - {type: endpoint, listen: '203.0.113.5:7390', allow_remote: true}\n",
			[]string{`test.yaml:3: actions[0].listen: "203.0.113.5:7390" is a public address: the decision endpoint tells anyone on the Internet who is banned; listen on a private or loopback address, or add endpoint_public to silence: if it is intended`}},
		{"endpoint every address", "actions:\n  - {type: endpoint, listen: '0.0.0.0:7390', allow_remote: true}\n",
			[]string{`test.yaml:3: actions[0].listen: "0.0.0.0:7390" is a public address`}},
		{"endpoint private", "actions:\n  - {type: endpoint, listen: '10.0.0.5:7390', allow_remote: true}\n", nil},
		{"endpoint silenced", "silence: [endpoint_public]\nactions:\n  - {type: endpoint, listen: '0.0.0.0:7390', allow_remote: true}\n", nil},
		{"both", "metrics: 0.0.0.0:9390\nactions:\n  - {type: endpoint, listen: '[2001:db8::1]:7390', allow_remote: true}\n",
			[]string{`test.yaml:2: metrics: "0.0.0.0:9390"`, `test.yaml:4: actions[0].listen: "[2001:db8::1]:7390" is a public address`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("test.yaml", []byte(base+tt.text), testOptions)
			if err != nil {
				t.Fatal(err)
			}
			ws := c.Warnings()
			if len(ws) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", ws, len(tt.want))
			}
			for i, w := range ws {
				if !strings.HasPrefix(w.Error(), tt.want[i]) {
					t.Errorf("warning %q, want it to start %q", w.Error(), tt.want[i])
				}
			}
		})
	}
	if _, err := Parse("test.yaml", []byte(base+"silence: [metrics]\n"), testOptions); err == nil || !strings.Contains(err.Error(), `silence[0]: unknown warning "metrics"`) {
		t.Errorf("silence: [metrics]: err %v", err)
	}
}
