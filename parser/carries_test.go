package parser

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCarries(t *testing.T) {
	for _, tt := range []struct {
		name   string
		o      Options
		fields []string
		xff    bool
	}{
		{"combined", Options{Format: "combined"},
			[]string{"bytes", "ip", "method", "path", "protocol", "query", "referer", "status", "time", "user", "user_agent"}, false},
		{"vhost_combined", Options{Format: "vhost_combined"},
			[]string{"bytes", "host", "ip", "method", "path", "port_canonical", "protocol", "query", "referer", "status", "time", "user", "user_agent"}, false},
		{"host_combined", Options{Format: "host_combined"},
			[]string{"bytes", "host", "ip", "method", "path", "protocol", "query", "referer", "server_port", "status", "time", "user", "user_agent"}, false},
		{"nginx with xff", Options{LogFormat: `$remote_addr [$time_local] "$request" $status $host "$http_x_forwarded_for" $upstream_http_x_cpu_time`, CPUField: "upstream_http_x_cpu_time"},
			[]string{"cpu", "host", "http_x_forwarded_for", "ip", "method", "path", "protocol", "query", "status", "time", "upstream_http_x_cpu_time"}, true},
		{"apache %D", Options{ApacheFormat: `%h %t "%r" %>s %D %{X-Forwarded-For}i`},
			[]string{"duration", "in_x_forwarded_for", "ip", "method", "path", "protocol", "query", "status", "time"}, true},
		{"json", Options{JSONFields: map[string]string{"ip": "a", "time": "t", "x_forwarded_for": "x", "vhost": "v"}},
			[]string{"ip", "time", "vhost", "x_forwarded_for"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.o)
			if err != nil {
				t.Fatal(err)
			}
			fields, xff := p.Carries()
			if diff := cmp.Diff(tt.fields, fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
			if xff != tt.xff {
				t.Errorf("xff = %v, want %v", xff, tt.xff)
			}
			if !slices.IsSorted(fields) {
				t.Errorf("fields not sorted: %q", fields)
			}
		})
	}
}
