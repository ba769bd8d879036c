// Package crowdsec is the bouncer side of CrowdSec's local API, served by
// the daemon for a `type: crowdsec` action, so that the bouncers people
// already run (crowdsec-firewall-bouncer, the custom bouncer, the
// nginx/OpenResty, Traefik and Caddy bouncers) take logjail's decisions
// unchanged. Its wire format follows CrowdSec's own code
// (pkg/apiserver/controllers/v1/decisions.go, pkg/models/decision.go) and
// what its bouncers' client library (go-cs-bouncer) parses.
//
// # What it serves
//
//   - GET /v1/decisions/stream (and HEAD): `{"new": [...], "deleted":
//     [...]}`, both always arrays ([] when empty, as CrowdSec writes
//     them). With startup=true: every active decision as new and nothing
//     deleted (CrowdSec also lists expired decisions there; a bouncer
//     starting flushes its own set, so logjail sends none). Without: the
//     decisions made since that bouncer's last pull, and those removed
//     since of the ones it had. Filters: scopes (default ip,range, as
//     CrowdSec), origins, scenarios_containing, scenarios_not_containing
//     (comma lists, case-insensitive substrings). HEAD answers 200 with
//     no body and does not move the bouncer's last pull (as CrowdSec).
//   - GET /v1/decisions (and HEAD): the active decisions matching ip,
//     range (with contains=true, the default: the decisions containing
//     it; false: those inside it), scope/scopes, value, type, origins,
//     scenarios_*; `null` when none, as CrowdSec answers.
//   - GET /health: `{"status":"up"}`, unauthenticated, as CrowdSec.
//   - Authentication: the X-Api-Key header. A missing or unknown key gets
//     what CrowdSec's middleware answers: 403 {"message":"access
//     forbidden"} (not 401: the brief asked for 401 "with the body
//     CrowdSec sends"; CrowdSec sends 403, and the bouncers treat any
//     non-200 alike).
//
// # Decisions
//
// The API is an actions.Backend: the manager hands it what it hands every
// action, one entry per blocked prefix (the union of the bans holding it:
// rules, the deny list, banned ranges, operators), and each entry becomes
// one decision: value the address (scope "Ip") or the prefix (scope
// "Range"), type "ban", or for a throttle the action's throttle_as
// (default "throttle": CrowdSec's bouncers act on the types they are
// configured for, supported_decisions_types, and the firewall bouncer's
// default is [ban], so a throttle never becomes a firewall drop unless
// throttle_as: ban asks for it; "captcha" sends throttled clients to the
// nginx/OpenResty bouncer's captcha), origin "logjail", scenario the rule
// of the ban that lasts longest, duration the time left as Go writes a
// duration rounded to the second ("3h59m58s"; a ban without an end is sent
// as ten years), id a positive integer. The v1 API sends no `until`, and
// neither does this one. Allowed prefixes inside a banned prefix (which
// CrowdSec's decisions cannot exempt) split it: the largest prefixes of it
// that hold no allowed address are sent instead.
//
// A decision is never changed in place: when an entry changes (a longer
// ban, another rule, throttle to ban) its decision is removed and a new
// one made, as CrowdSec's bouncers expect (they apply deletions, then new
// decisions). A removal whose value is active again with the same type in
// the same answer is left out, so that no bouncer drops a ban that holds.
//
// # Sequence numbers and restarts
//
// IDs come from one counter that also numbers removals: a decision's ID
// is the number it was made at, a removal the number it was made at. Each
// bouncer's last stream pull records the counter it reached (LastSeq); its
// next delta is the active decisions with a higher ID and the removals
// with a higher number of decisions with an ID up to it. The decisions,
// removals, bouncers and their LastSeq are in the database (tables
// bouncers and bouncer_decisions), written before an answer shows them, so
// a restart of logjail loses nothing: the API starts from the decisions it
// served, the manager's first Sync then removes what ended while logjail
// was down (expired or lifted) and adds what is new, and each bouncer's
// next delta holds exactly that. A restart of a bouncer pulls with
// startup=true. The counter starts past every number a bouncer reached,
// so a number is never given twice. Removals every bouncer has pulled are
// pruned (a bouncer that never pulled the stream needs none); a bouncer
// that pulled once and stopped holds them: `logjail bouncers delete` it.
//
// # Keys
//
// `logjail bouncers add NAME` makes a key of 32 random bytes (64 hex
// characters), prints it once and stores only its SHA-256 (a salted slow
// hash buys nothing for a random 256-bit key); the API compares the hash
// with every bouncer's in constant time. The API re-reads the bouncers
// from the database when a request comes and its copy is a second old, and
// at once when a key is unknown (a small indexed table): a key added (by
// the CLI, with or without the daemon) works at once, so a bouncer
// started right after `bouncers add` is not refused its first pull (the
// bouncers quit when their first pull fails); a key deleted through the
// daemon is refused from the moment `bouncers delete` returns (the daemon
// has the API read them again: API.Reread), one deleted on the database
// alone within a second. The price of a flood of wrong keys is one read of the
// table each; the API listens on loopback unless told otherwise. A pull records the bouncer's time, address and
// User-Agent (a /v1/decisions query at most once a minute, as CrowdSec),
// which `logjail bouncers list` and `logjail status` show.
//
// # Listening
//
// `listen:` defaults to 127.0.0.1:8080, the address bouncers are
// configured for by default; any address the operator writes is taken
// (a bouncer on another host needs it), and tls_cert with tls_key serve
// HTTPS. A configuration has one crowdsec action (`logjail check` refuses
// a second): it serves every bouncer, from one sequence of decisions in
// the database. A reload does not move the listener: a change of the action's
// options takes a restart (the daemon's reload warns).
//
// Boundaries: It owns the wire format and the decisions' sequence. It
// must not decide who is banned (the manager hands it the entries), and
// it reads and writes the database only through state.Bouncers.
package crowdsec
