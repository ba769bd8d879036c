package store_test

import (
	"path/filepath"
	"testing"

	"github.com/logjail/logjail/state"
	"github.com/logjail/logjail/state/statetest"
	"github.com/logjail/logjail/store"
)

// TestConformance runs state's conformance suite against SQLite: the
// database logjail.db in the suite's directory.
func TestConformance(t *testing.T) {
	statetest.Run(t, func(dir string, readOnly bool) (state.Store, error) {
		db, err := store.Open(filepath.Join(dir, "logjail.db"), store.Options{ReadOnly: readOnly})
		if err != nil {
			return nil, err
		}
		return db, nil
	})
}
