package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pollbal/configs"
	"pollbal/internal/markdown"
)

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestConfigurationReferenceIsTheShippedFile(t *testing.T) {
	want := read(t, "../configs/pollbal.yaml")
	if !slices.Contains(markdown.FencedBlocks(read(t, "configuration.md"), "yaml"), want) {
		t.Fatal("docs/configuration.md has no yaml block equal to configs/pollbal.yaml: copy the file into its \"Every key\" section")
	}
}

// TestConfigurationSlipsExample loads the slips.yaml that docs/configuration.md shows and
// compares the problems with the console block under it, line for line.
func TestConfigurationSlipsExample(t *testing.T) {
	doc := read(t, "configuration.md")
	var example, console string
	for _, b := range markdown.FencedBlocks(doc, "yaml") {
		if strings.HasPrefix(b, "# slips.yaml\n") {
			example = b
		}
	}
	for _, b := range markdown.FencedBlocks(doc, "console") {
		if strings.HasPrefix(b, "$ pollbal check -config slips.yaml\n") {
			console = b
		}
	}
	if example == "" || console == "" {
		t.Fatal("docs/configuration.md lacks the slips.yaml block or its console block")
	}
	want := strings.Split(strings.TrimSuffix(console, "\n"), "\n")[1:]
	_, err := configs.Parse([]byte(example))
	if got := configs.Problems(err); !slices.Equal(got, want) {
		t.Fatalf("pollbal check prints\n%s\ndocs/configuration.md says\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// markdownFiles are the documents a forge renders: the README and everything in docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md", "../bench/README.md")
	examples, err := filepath.Glob("../examples/*/README.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, examples...)
}

var (
	linkRe       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodeRe = regexp.MustCompile("`[^`]*`")
	headingRe    = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
	slugDropRe   = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
)

// slug is the anchor a forge (GitHub, Gitea, GitLab) gives a heading: lower case, punctuation
// dropped, spaces turned into hyphens.
func slug(heading string) string {
	s := strings.ToLower(strings.TrimSpace(heading))
	s = slugDropRe.ReplaceAllString(s, "")
	return strings.ReplaceAll(s, " ", "-")
}

// anchors returns the anchors of a Markdown text's headings (outside code blocks), with the
// -1, -2 suffixes that repeated headings get.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		a := slug(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// proseLines returns the lines of text outside fenced code blocks.
func proseLines(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// TestLinks follows every relative link of the README, docs/*.md and the examples' READMEs: the
// file (or directory) must exist in the repository and a #fragment must name a heading of it.
func TestLinks(t *testing.T) {
	checked := 0
	for _, file := range markdownFiles(t) {
		text := read(t, file)
		for _, line := range proseLines(text) {
			line = inlineCodeRe.ReplaceAllString(line, "")
			for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, fragment, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(resolved); err != nil {
						t.Errorf("%s: link %q: %s does not exist", file, target, filepath.Clean(resolved))
						continue
					}
				}
				if fragment == "" {
					continue
				}
				if !strings.HasSuffix(resolved, ".md") {
					t.Errorf("%s: link %q: a #fragment on a file that is not Markdown", file, target)
					continue
				}
				if !anchors(read(t, resolved))[fragment] {
					t.Errorf("%s: link %q: %s has no heading with the anchor #%s", file, target, filepath.Clean(resolved), fragment)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found: is the link pattern still right?", checked)
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{heading: "The `/pool` protocol", want: "the-pool-protocol"},
		{heading: "`POST /pool_warning`", want: "post-pool_warning"},
		{heading: "`warning_scope`: `version` or `service`", want: "warning_scope-version-or-service"},
		{heading: "Caveats (read before quoting numbers)", want: "caveats-read-before-quoting-numbers"},
		{heading: "One update, step by step", want: "one-update-step-by-step"},
	}
	for _, tc := range tests {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

// TestNoReferenceOutsideTheRepository: user-facing text explains pollbal in its own words and
// points only at files a clone has (issue 14: the README, configs, --help and the nginx README
// cited a specification that is not in the repository, and the benchmarks needed ../shared).
func TestNoReferenceOutsideTheRepository(t *testing.T) {
	files := markdownFiles(t)
	for _, pattern := range []string{"../configs/*.yaml", "../examples/*/*.yaml", "../examples/*/*.service",
		"../examples/*/*.in", "../scripts/*.sh", "../scripts/*.cgi", "../cmd/pollbal/main.go", "../internal/testbackend/main.go"} {
		more, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	for _, file := range files {
		text := read(t, file)
		for _, bad := range []string{"SPEC §", "SPEC.md", "../shared"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s mentions %q", filepath.Clean(file), bad)
			}
		}
	}
}
