package bench

import (
	"path/filepath"
	"strings"
	"testing"
)

// The committed report is what the committed CSV files say: every headline
// figure is computed again from them and compared.
func TestCommittedReportHeadlinesFollowFromCommittedCSVs(t *testing.T) {
	if err := CheckReport(filepath.Join("..", "..", "docs", "benchmarks")); err != nil {
		t.Error(err)
	}
}

// CheckReport notices an edited figure.
func TestCheckReportRefusesAHeadlineTheCSVsDoNotSay(t *testing.T) {
	dir := t.TempDir()
	pr := Probe{Direct: true, Read8KMBps: 90, Read128KMBps: 400, DSyncWriteMs: 0.3, SleepFloorMs: 1.1, Sleep1msMs: 1.1}
	tb, err := probeTable(pr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Write(dir); err != nil {
		t.Fatal(err)
	}
	h, err := probeHeadline(tablesOf([]*Table{tb}))
	if err != nil {
		t.Fatal(err)
	}
	res := &Result{Sections: []*Section{{ID: 0, Title: "Machine probe", Headline: h}}}
	if err := WriteReport(dir, res); err != nil {
		t.Fatal(err)
	}
	if err := CheckReport(dir); err == nil {
		t.Fatal("a report without sections 1-6 passed")
	}
	pr.Read8KMBps = 91
	tb2, _ := probeTable(pr)
	if _, err := tb2.Write(dir); err != nil {
		t.Fatal(err)
	}
	err = CheckReport(dir)
	if err == nil || !strings.Contains(err.Error(), "section 0") {
		t.Errorf("a CSV that no longer says the headline's 90.0 MB/s: %v", err)
	}
}
