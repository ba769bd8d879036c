package samplelog

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/logs/sample/shop.fpm.log")

const golden = "../../testdata/logs/sample/shop.fpm.log"

// TestGolden checks that the committed sample is what Write writes, so
// that the file and its documented abusers cannot drift apart.
func TestGolden(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("Write is not deterministic: two runs differ")
	}
	if *update {
		if err := os.WriteFile(filepath.FromSlash(golden), a.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filepath.FromSlash(golden))
	if err != nil {
		t.Fatalf("%v (go test ./internal/samplelog -update writes it)", err)
	}
	if !bytes.Equal(got, a.Bytes()) {
		t.Errorf("%s differs from what Write writes: run go test ./internal/samplelog -update and review the diff", golden)
	}
}
