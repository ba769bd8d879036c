package main

import (
	"strings"
	"testing"

	"github.com/logjail/logjail/control"
)

// TestStatusEndpoints: `logjail status` says whether each decision
// endpoint serves, has loaded its bans, and why it does not serve.
func TestStatusEndpoints(t *testing.T) {
	st := &control.Status{Live: true, Endpoints: []control.EndpointState{
		{Name: "endpoint", Listen: "127.0.0.1:7390", Serving: true, Ready: true, Conns: 3, Evicted: 7, AcceptErrors: 2},
		{Name: "loading", Listen: "127.0.0.1:7391", Serving: true},
		{Name: "dead", Listen: "127.0.0.1:7392", Error: "the endpoint stopped serving: 127.0.0.1:7392: accept: invalid argument"},
	}}
	var b strings.Builder
	printStatus(&b, st, "/run/logjail/control.sock")
	for _, want := range []string{
		"endpoints:\n",
		"  endpoint on 127.0.0.1:7390: serving; 3 connections, 7 evicted, 2 accept errors\n",
		"  loading on 127.0.0.1:7391: serving, bans not loaded yet (answering by fail); 0 connections",
		"  dead on 127.0.0.1:7392: NOT SERVING: the endpoint stopped serving",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status does not say %q:\n%s", want, b.String())
		}
	}
}
