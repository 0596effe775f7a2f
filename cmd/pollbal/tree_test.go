package main

// Issue 28: built binaries were committed (a 20 MB /backend at the root). Nothing built
// belongs in the tree; .gitignore keeps the build outputs out and this test catches the rest.

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// elfMagic starts every ELF file (executables, objects, shared libraries).
var elfMagic = []byte{0x7f, 'E', 'L', 'F'}

// isELF reports whether the file at path starts with the ELF magic.
func isELF(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head := make([]byte, len(elfMagic))
	if _, err := io.ReadFull(f, head); err != nil {
		// Shorter than the magic: not an ELF file.
		return false, nil
	}
	return bytes.Equal(head, elfMagic), nil
}

func TestTreeHoldsNoBinaries(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git not installed")
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not inside a git repository (a source tarball): no tree to list")
	}
	root := strings.TrimSpace(string(top))
	// The detector must know an ELF file when it sees one: the pollbal binary built for these tests.
	if elf, err := isELF(bins.pollbal); err != nil || !elf {
		t.Fatalf("isELF(%s) = %v, %v; want true", bins.pollbal, elf, err)
	}
	out, err := exec.Command(git, "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git ls-files lists %d files; want the whole tree", len(files))
	}
	for _, f := range files {
		path := filepath.Join(root, f)
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		elf, err := isELF(path)
		if err != nil {
			t.Fatal(err)
		}
		if elf {
			t.Errorf("%s is an ELF binary: remove it from git (git rm --cached %s) and build it instead; .gitignore covers bin/, dist/ and the build outputs", f, f)
		}
	}
}
