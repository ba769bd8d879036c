package actions

import (
	"slices"
	"strings"
	"testing"

	"github.com/logjail/logjail/rules"
)

// TestCrowdsecOptions: the crowdsec action's options, their defaults and
// their errors, each at its option.
func TestCrowdsecOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		opts map[string]any
		key  string
	}{
		{"every interface", map[string]any{"listen": ":8080"}, "listen"},
		{"no port", map[string]any{"listen": "127.0.0.1"}, "listen"},
		{"port too high", map[string]any{"listen": "127.0.0.1:70000"}, "listen"},
		{"cert without key", map[string]any{"tls_cert": "/etc/logjail/tls.crt"}, "tls_key"},
		{"key without cert", map[string]any{"tls_key": "/etc/logjail/tls.key"}, "tls_cert"},
		{"bad throttle_as", map[string]any{"throttle_as": "drop"}, "throttle_as"},
		{"bad on", map[string]any{"on": []any{"unban"}}, "on"},
		{"unknown option", map[string]any{"api_key": "x"}, "api_key"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Builtin(nil).Check(&rules.Config{File: "logjail.yaml", Actions: []rules.Action{{Type: "crowdsec", Line: 7, Options: c.opts}}})
			want := "logjail.yaml:7: actions[0]." + c.key + ":"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Check(%v): error %v, want one with %q", c.opts, err, want)
			}
		})
	}
	two := []rules.Action{{Type: "crowdsec", Index: 0, Line: 7, Options: map[string]any{}}, {Type: "crowdsec", Index: 1, Line: 9, Options: map[string]any{"listen": "127.0.0.1:8081"}}}
	if err := Builtin(nil).Check(&rules.Config{File: "logjail.yaml", Actions: two}); err == nil || !strings.Contains(err.Error(), "logjail.yaml:9: actions[1].type: a second crowdsec action") {
		t.Errorf("two crowdsec actions: %v", err)
	}
	o := NewOptions("logjail.yaml", 0, "crowdsec", map[string]any{})
	c := ParseCrowdsec(o)
	if err := o.Err(); err != nil || c.Name != "crowdsec" || c.Listen != "127.0.0.1:8080" || c.ThrottleAs != "throttle" ||
		!slices.Equal(c.Kinds, []Kind{KindThrottle, KindBan}) || c.TLSCert != "" {
		t.Errorf("defaults: %+v %v", c, err)
	}
	o = NewOptions("/etc/logjail/logjail.yaml", 0, "crowdsec", map[string]any{"listen": "192.0.2.10:8443", "tls_cert": "tls.crt", "tls_key": "/k.pem", "on": []any{"ban"}, "throttle_as": "captcha"})
	c = ParseCrowdsec(o)
	if err := o.Err(); err != nil || c.Listen != "192.0.2.10:8443" || c.TLSCert != "/etc/logjail/tls.crt" || c.TLSKey != "/k.pem" || !slices.Equal(c.Kinds, []Kind{KindBan}) || c.ThrottleAs != "captcha" {
		t.Errorf("an address the operator writes, TLS, on, throttle_as: %+v %v", c, err)
	}
}
