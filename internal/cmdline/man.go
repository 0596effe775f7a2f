package cmdline

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// Man writes the program's manual page in roff (man(7) macros) for section 1; version goes
// in the page's footer. It renders the same definitions as Help and CommandHelp.
func (p *Program) Man(w io.Writer, version string) {
	name := strings.ToUpper(p.Name)
	fmt.Fprintf(w, ".TH %s 1 \"\" %s \"User Commands\"\n", name, roffQuote(p.Name+" "+version))
	fmt.Fprintf(w, ".SH NAME\n%s \\- %s\n", roffText(p.Name), roffText(p.Summary))
	fmt.Fprintln(w, ".SH SYNOPSIS")
	for i, c := range p.Commands {
		if i > 0 {
			fmt.Fprintln(w, ".br")
		}
		fmt.Fprintf(w, ".B %s\n", roffText(p.Name+" "+c.Name))
		if c.Args != "" {
			fmt.Fprintln(w, roffText(c.Args))
		}
	}
	fmt.Fprintln(w, ".SH DESCRIPTION")
	writeParagraphs(w, p.Description)
	fmt.Fprintln(w, ".SH COMMANDS")
	for _, c := range p.Commands {
		fmt.Fprintf(w, ".SS %s\n", roffText(p.Name+" "+c.Name))
		writeParagraphs(w, c.Description)
		fs := p.FlagSet(c, io.Discard)
		fs.VisitAll(func(f *flag.Flag) {
			placeholder, usage := flag.UnquoteUsage(f)
			fmt.Fprintln(w, ".TP")
			if placeholder == "" {
				fmt.Fprintf(w, ".B %s\n", roffText("-"+f.Name))
			} else {
				fmt.Fprintf(w, ".BI %s \" %s\"\n", roffText("-"+f.Name), roffText(placeholder))
			}
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				usage += fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintln(w, roffLines(usage))
		})
	}
	for _, s := range p.Sections {
		fmt.Fprintf(w, ".SH %s\n", roffText(strings.ToUpper(s.Title)))
		writeParagraphs(w, s.Text)
	}
}

// writeParagraphs writes text's paragraphs (separated by blank lines); a paragraph whose lines
// all start with two spaces is a list: "  TERM  definition", each item one tagged paragraph.
func writeParagraphs(w io.Writer, text string) {
	for i, para := range strings.Split(strings.Trim(text, "\n"), "\n\n") {
		lines := strings.Split(strings.Trim(para, "\n"), "\n")
		if isList(lines) {
			for _, l := range lines {
				term, def, _ := strings.Cut(strings.TrimSpace(l), "  ")
				fmt.Fprintf(w, ".TP\n.B %s\n%s\n", roffText(term), roffLines(strings.TrimSpace(def)))
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(w, ".PP")
		}
		fmt.Fprintln(w, roffLines(strings.Join(lines, "\n")))
	}
}

func isList(lines []string) bool {
	for _, l := range lines {
		if !strings.HasPrefix(l, "  ") || !strings.Contains(strings.TrimSpace(l), "  ") {
			return false
		}
	}
	return len(lines) > 0
}

// roffText escapes text for one roff line: a backslash prints as itself and a hyphen as a
// hyphen-minus (so that options can be searched and copied), and no line starts as a request.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffLines escapes each line of s with roffText.
func roffLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = roffText(strings.TrimSpace(l))
	}
	return strings.Join(lines, "\n")
}

// roffQuote makes s one macro argument.
func roffQuote(s string) string {
	return `"` + strings.ReplaceAll(roffText(s), `"`, `\(dq`) + `"`
}
