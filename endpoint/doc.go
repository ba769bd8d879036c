// Package endpoint is the decision endpoint (`type: endpoint`): an HTTP
// server inside the daemon that a reverse proxy asks before serving each
// request (nginx auth_request, Traefik ForwardAuth, Caddy forward_auth),
// and a Cerberus-style query.
//
// GET /auth answers for the client: 200 allowed, 403 banned (the deny list
// included), 429 throttled with Retry-After set to the ladder's current
// delay. The client is the peer, unless the peer is one of the endpoint's
// trusted_proxies (default: loopback, where the proxy asking normally is):
// then the rightmost address of X-Forwarded-For that is not a trusted
// proxy, or X-Real-IP when there is no X-Forwarded-For. The proxy must set
// the header itself, replacing what the client sent; a header that does not
// parse is a 400, never a guess. Every answer carries X-Logjail-Decision
// (allow, throttle, ban, unready), for nginx's auth_request_set; a JSON
// body only when the caller sends Accept: application/json. An allowed
// address (allow list, host addresses, trusted proxies) is let through a
// ban of a wider prefix that contains it; a ban of the allowed key itself,
// which only an operator's ban --force makes, holds. Until the daemon has
// loaded its state, `fail: open` answers 200 and `fail: closed` 503.
//
// GET /v1/throttle?ip=ADDRESS&event=RULE answers as Cerberus does:
// {"throttle": {"range", "reason", "sleep", "request_count"}}: sleep -1 and
// reason "banned" for a banned client; when a limit is over, the seconds
// until its sliding window falls back within it when no request comes
// meanwhile (raised to second_penalty for limits of a second or less) and
// the limit's period as the reason ("second", "minute", "10s"); 0 when
// allowed. event is a rule name; without it every rule is asked. The key
// of a rule is computed from the address alone: rules keyed by user or
// user agent are answered from the bans only.
//
// The answers come from memory: the bans from a Bans view the actions
// manager keeps current like any other action (on: [throttle, ban]), the
// windows through the Windows interface the daemon implements over its
// detector. No request reads the database.
//
// The endpoint listens on loopback (127.0.0.1:7390 by default) or a unix
// socket (listen: unix:/run/logjail/auth.sock, mode 0666: nothing can be
// changed through it), and refuses a non-loopback address without
// allow_remote: true, since it tells anyone who asks who is banned.
package endpoint
