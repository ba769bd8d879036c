package actions

import (
	"net"
	"strconv"
)

// CrowdsecDefaultListen is where the CrowdSec decisions API listens without
// `listen:`: the address CrowdSec's bouncers are configured for by default
// (api_url: http://127.0.0.1:8080/).
const CrowdsecDefaultListen = "127.0.0.1:8080"

// CrowdsecConfig is the options of a `type: crowdsec` action, which package
// crowdsec serves inside the daemon (the row of Builtin only checks them:
// the API needs the database, which a Builder does not get).
type CrowdsecConfig struct {
	Name            string // `name:`, default "crowdsec"
	Listen          string // host:port; loopback by default, any address the operator writes
	TLSCert, TLSKey string // both or neither: HTTPS with that certificate
	Kinds           []Kind // `on:`, default [throttle, ban]: bouncers choose by type themselves
	ThrottleAs      string // the CrowdSec type a logjail throttle is sent as: throttle (default), captcha or ban
}

// ParseCrowdsec reads the options of a crowdsec action; its problems are
// recorded in o (o.Err).
func ParseCrowdsec(o *Options) CrowdsecConfig {
	c := CrowdsecConfig{
		Name:       o.String("name", "crowdsec"),
		Listen:     o.String("listen", CrowdsecDefaultListen),
		ThrottleAs: o.OneOf("throttle_as", "throttle", "throttle", "captcha", "ban"),
		Kinds:      []Kind{KindThrottle, KindBan},
	}
	if o.Has("on") {
		c.Kinds = o.kinds()
	}
	for _, k := range []struct {
		key string
		to  *string
	}{{"tls_cert", &c.TLSCert}, {"tls_key", &c.TLSKey}} {
		if o.String(k.key, "") != "" {
			*k.to = o.Path(k.key, "")
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		key := "tls_key"
		if c.TLSCert == "" {
			key = "tls_cert"
		}
		o.errorf(key, "give tls_cert and tls_key together")
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		o.errorf("listen", "%q: want host:port (port 0-65535)", c.Listen)
	} else if host == "" {
		o.errorf("listen", "%q: give the address to listen on (127.0.0.1:%s for this host only); an empty host would listen on every interface", c.Listen, port)
	}
	return c
}

func checkCrowdsec(o *Options) { ParseCrowdsec(o) }

// crowdsecPort is the port of a crowdsec action's listen address, for the
// systemd drop-in (a port below 1024 needs CAP_NET_BIND_SERVICE).
func crowdsecPort(listen string) int {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}
