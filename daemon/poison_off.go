//go:build !logjail_poison

package daemon

// poisonTexts: see poison_on.go.
const poisonTexts = false
