package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content *string
		want    string
		wantErr string
	}{
		{name: "trimmed", content: strPtr("  s3cret\n\n"), want: "s3cret"},
		{name: "inner spaces kept", content: strPtr("a b\n"), want: "a b"},
		{name: "empty is an error", content: strPtr(" \n\t"), wantErr: "is empty"},
		{name: "missing is an error", content: nil, wantErr: "no such file"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "secret"+string(rune('a'+i)))
			if tc.content != nil {
				if err := os.WriteFile(path, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Read(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("Read() = %q, %v; want an error naming %s and containing %q", got, err, path, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("Read() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func strPtr(s string) *string { return &s }
