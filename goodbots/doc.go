// Package goodbots knows the good bots: search engines' crawlers, which
// can be verified by their address, and uptime monitors, which can only be
// recognised by their user agent. Package rules uses it to charge a
// verified crawler as one key (range:NAME, under good_bots' limits) rather
// than as an attacker, while a client that only claims to be a crawler is
// charged as anyone else.
//
// # The data
//
// bots.txt, embedded, is the one list: for each crawler the user-agent
// tokens that claim it, its published ranges with their source and date,
// and its reverse DNS domains; for each monitor its tokens. Its header
// describes the format. The ranges are facts copied from the crawlers'
// own publications, through the daily snapshot at
// github.com/AnTheMaker/GoodBots (commit fb6de89dd6fe of 2026-08-22, read
// on 2026-11-25):
//
//   - googlebot: Google's common-crawlers.json (Googlebot, its image,
//     video and news variants, Storebot, Google-InspectionTool,
//     GoogleOther), unchanged from 2026-06-10 to 2026-08-22; DNS
//     googlebot.com, google.com (not googleusercontent.com: Google's
//     customers' machines are there too).
//   - bingbot: Bing's bingbot.json, unchanged since 2024-01-12; DNS
//     search.msn.com.
//   - applebot: Apple's applebot.json of 2026-08-14; DNS
//     applebot.apple.com.
//   - duckduckbot: the addresses on DuckDuckGo's DuckDuckBot help page, of
//     2025-05-19; DuckDuckGo publishes no DNS names.
//   - yandexbot and baiduspider publish no ranges (Yandex's networks, which
//     some lists use, include Yandex Cloud's customers): they are verified
//     by DNS only (yandex.ru, yandex.net, yandex.com; crawl.baidu.com,
//     crawl.baidu.jp), so under verify: ranges a YandexBot is charged as
//     an ordinary client.
//
// Monitors (UptimeRobot, Pingdom, StatusCake, Site24x7, Better Stack,
// Freshping, HetrixTools, Uptime Kuma, Datadog and New Relic synthetics,
// updown.io, Oh Dear) are recognised only: a user agent is free to fake,
// and their published addresses change with every probe location, so
// they are charged as ordinary clients; replay uses Agent to flag a ban
// of one as a likely mistake.
//
// The file is compiled once, on first use, into routing tables and the
// token index; that compiled table never changes: the package has no
// mutable state.
//
// # Agent
//
// Agent(ua) runs on every log line, so it is a byte-level scan, not a
// regular expression per bot: at each word start of ua it tests the first
// two bytes (ASCII case ignored) against a 64 Kbit set of the tokens'
// first two bytes, and compares tokens only on a hit. A browser's user
// agent costs a few dozen table lookups and no allocation
// (BenchmarkAgent).
//
// # Verification
//
// Verifier.Verify(addr, crawler) first looks addr up in the crawler's
// published ranges: deterministic, offline, what replay and the default
// configuration (verify: ranges) use. With a Resolver (verify: dns, in the
// daemon) an address outside the ranges is checked by forward-confirmed
// reverse DNS, as the crawlers document it: the PTR names of addr, one of
// them under the crawler's domains (crawl-66-249-66-1.googlebot.com), and
// that name's A/AAAA records containing addr. A PTR alone proves nothing
// (whoever owns an address writes its PTR); the forward lookup is in the
// crawler's own zone.
//
// DNS is asynchronous because Verify is on the pipeline's hot path: a
// lookup can take seconds, and a line must not wait for it. The first
// request of an unknown address gets Pending and starts a lookup in the
// background; until the answer comes the address is charged as an
// ordinary client (a real crawler's first requests count against the
// ordinary rules, which a few requests never trip; a fake one gains
// nothing). Lookups are bounded (MaxLookups at once, each within Timeout;
// past the bound Verify says Pending without starting one) and answers
// are cached per (address, crawler) with TTLs: PositiveTTL for a verified
// address, NegativeTTL for one DNS denies (NXDOMAIN, a PTR outside the
// domains, a forward lookup that does not lead back), ErrorTTL for a
// lookup that failed to get an answer. The cache holds at most CacheSize
// answers; full, it drops the expired ones, then starts over. Close stops
// the lookups; Settle waits for them.
//
// Because answers arrive in wall time, verify: dns makes the live daemon
// decide slightly differently from a replay of the same lines (which
// checks the ranges only): the price of verifying crawlers that publish
// no ranges.
//
// Boundaries: It owns the known crawlers and monitors and their
// verification. Its only I/O is DNS, through the Resolver it is given,
// asynchronously and bounded; it must not decide bans.
package goodbots
