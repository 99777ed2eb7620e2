package sql

import (
	"fmt"
	"testing"
)

func render(fields []*string) string {
	out := ""
	for i, f := range fields {
		if i > 0 {
			out += "|"
		}
		if f == nil {
			out += "NULL"
		} else {
			out += fmt.Sprintf("%q", *f)
		}
	}
	return out
}

func TestCopyTextLinesSplitAndUnescapeAsPostgreSQL(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"1\t2\t3", `"1"|"2"|"3"`},
		{`a\tb` + "\t" + `\N`, `"a\tb"|NULL`},
		{`\\N`, `"\\N"`},
		{`\101\x42\n\\`, `"AB\n\\"`},
		{"\t", `""|""`},
		{`trailing\`, `"trailing\\"`},
	} {
		f, err := splitCopyLine([]byte(tc.line))
		if err != nil {
			t.Fatal(err)
		}
		if got := render(f); got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.line, got, tc.want)
		}
	}
}

// FuzzCopyLine: any line from a client splits without panicking.
func FuzzCopyLine(f *testing.F) {
	f.Add([]byte("1\t\\N\t\\x4g\\777\\"))
	f.Fuzz(func(t *testing.T, line []byte) {
		if _, err := splitCopyLine(line); err != nil {
			t.Skip()
		}
	})
}
