//go:build logjail_poison

package daemon

// poisonTexts, under the build tag logjail_poison, has every daemon of the
// tests overwrite the buffers of the lines' texts as they come back for
// reuse (spares, Options.poison): `go test -tags logjail_poison ./daemon/`
// runs the whole suite so, and a string read after its batch was recycled
// changes what a test sees.
const poisonTexts = true
