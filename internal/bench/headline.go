package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// tables are an experiment's tables by name.
type tables map[string]*Table

func tablesOf(ts []*Table) tables {
	out := tables{}
	for _, t := range ts {
		out[t.Name] = t
	}
	return out
}

// readTables reads the CSV files of dir written by a run, by table name.
func readTables(dir string) (tables, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.csv"))
	if err != nil {
		return nil, err
	}
	out := tables{}
	for _, p := range paths {
		h, rows, err := ReadCSV(p)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(p)
		name = name[:len(name)-len(".csv")]
		out[name] = &Table{Name: name, Header: h, Rows: rows}
	}
	return out, nil
}

// cells reads numbers out of tables, keeping the first error, so a
// headline reads as one sentence of lookups.
type cells struct {
	ts  tables
	err error
}

func (c *cells) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

// rows returns table name's rows whose first column is label ("" = all).
func (c *cells) rows(name, label string) [][]string {
	t, ok := c.ts[name]
	if !ok {
		c.fail("no table %s", name)
		return nil
	}
	var out [][]string
	for _, r := range t.Rows {
		if label == "" || r[0] == label {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		c.fail("table %s has no row %q", name, label)
	}
	return out
}

// row is the first of rows(name, label), or nil.
func (c *cells) row(name, label string) []string {
	if rs := c.rows(name, label); len(rs) > 0 {
		return rs[0]
	}
	return nil
}

// num is column col of row r of table name, as a number.
func (c *cells) num(name string, r []string, col string) float64 {
	t, ok := c.ts[name]
	if !ok || r == nil {
		c.fail("no table %s or row", name)
		return 0
	}
	i := slices.Index(t.Header, col)
	if i < 0 || i >= len(r) {
		c.fail("table %s has no column %s", name, col)
		return 0
	}
	v, err := strconv.ParseFloat(r[i], 64)
	if err != nil {
		c.fail("table %s column %s: %w", name, col, err)
	}
	return v
}

// text is column col of row r of table name.
func (c *cells) text(name string, r []string, col string) string {
	t, ok := c.ts[name]
	if !ok || r == nil {
		c.fail("no table %s or row", name)
		return ""
	}
	i := slices.Index(t.Header, col)
	if i < 0 || i >= len(r) {
		c.fail("table %s has no column %s", name, col)
		return ""
	}
	return r[i]
}

// Rule is a conclusion printed only when the run's own figures show it:
// Statement says how it is decided, Holds whether the figures met it,
// Then or Else what the report says in each case.
type Rule struct {
	Statement  string
	Holds      bool
	Then, Else string
}

// Conclusion is what the report prints for the rule on this run.
func (r Rule) Conclusion() string {
	if r.Holds {
		return r.Then
	}
	return r.Else
}

// Verdict says what of a field report this run reproduced.
type Verdict struct {
	Field   string // the field report's figure
	Run     string // this run's figure
	Outcome string // reproduced, not reproduced, solved, met, not measured here...
	Why     string // the reason, from the run's figures
}

// Verdicts of an experiment.
const (
	Reproduced    = "reproduced"
	NotReproduced = "not reproduced"
)

// sentence is fmt.Sprintf, named for what it makes.
func sentence(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// CheckReport compares the headlines of dir/REPORT.md with the headlines
// computed again from dir's CSV files, and fails on any difference: every
// figure of a headline must follow from the committed data. A section of
// pending may be absent, headline and CSV files alike (an experiment added
// after the report was last written in full), or have CSV files its headline
// cannot be computed from (an experiment rewritten since).
func CheckReport(dir string, pending ...int) error {
	b, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		return err
	}
	ts, err := readTables(dir)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	if lines[0] != ReportTitle {
		return fmt.Errorf("%s: title %q, want %q", ReportFile, lines[0], ReportTitle)
	}
	got := map[int]string{}
	in := false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "## "):
			in = l == "## Headlines"
		case in && strings.HasPrefix(l, "- **"):
			var id int
			if _, err := fmt.Sscanf(l, "- **%d.", &id); err != nil {
				return fmt.Errorf("%s: headline %q: %w", ReportFile, l, err)
			}
			_, text, ok := strings.Cut(l, ".** ")
			if !ok {
				return fmt.Errorf("%s: headline %q has no title", ReportFile, l)
			}
			got[id] = text
		}
	}
	var errs []error
	for _, e := range experiments {
		want, err := e.headline(ts)
		switch g, ok := got[e.id]; {
		case !ok && slices.Contains(pending, e.id) && !hasSection(ts, e.id):
			// A section the report predates, named by the caller: neither a headline nor a
			// CSV file of it to disagree with (the next full run writes both).
		case err != nil && slices.Contains(pending, e.id):
			// A section rewritten since the report was written in full, named by the
			// caller: its committed CSV files are of the old form, which the new headline
			// cannot read (the next full run writes both anew).
		case err != nil:
			errs = append(errs, fmt.Errorf("section %d: its headline from the CSV files of %s: %w", e.id, dir, err))
		case !ok:
			errs = append(errs, fmt.Errorf("%s has no headline for section %d", ReportFile, e.id))
		case g != want:
			errs = append(errs, fmt.Errorf("section %d: %s says\n\t%s\nits CSV files say\n\t%s", e.id, ReportFile, g, want))
		}
	}
	return errors.Join(errs...)
}

// hasSection reports whether ts holds a CSV file of experiment id (named expN_...).
func hasSection(ts tables, id int) bool {
	prefix := fmt.Sprintf("exp%d_", id)
	for name := range ts {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// joinComma joins parts with ", ".
func joinComma(parts []string) string { return strings.Join(parts, ", ") }
