package state_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/logjail/logjail/internal/testenv"
)

// sqlImports are the packages only store may import.
var sqlImports = []string{"database/sql", "database/sql/driver", "github.com/mattn/go-sqlite3"}

// TestOnlyStoreSpeaksSQL lists the module's packages with go list: no
// package but store imports database/sql or go-sqlite3, in its code or its
// tests, and state depends on neither them nor store.
func TestOnlyStoreSpeaksSQL(t *testing.T) {
	goCmd := testenv.Need(t, "go")[0]
	const module = "github.com/logjail/logjail"
	out, err := exec.Command(goCmd, "list", "-deps=false", "-test=false", "-f",
		`{{.ImportPath}}|{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs int
	for line := range strings.Lines(string(out)) {
		path, imports, _ := strings.Cut(strings.TrimSpace(line), "|")
		pkgs++
		if path == module+"/store" {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if slices.Contains(sqlImports, imp) {
				t.Errorf("%s imports %s: only store may (state's interfaces are the way in)", path, imp)
			}
		}
	}
	if pkgs < 20 {
		t.Fatalf("go list listed %d packages: %s", pkgs, out)
	}
	deps, err := exec.Command(goCmd, "list", "-deps", module+"/state").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for dep := range strings.Lines(string(deps)) {
		dep = strings.TrimSpace(dep)
		if slices.Contains(sqlImports, dep) || dep == module+"/store" {
			t.Errorf("state depends on %s: it must import no implementation", dep)
		}
	}
}
