package runnerwire

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestSmallSummaryIsEncodedWhole(t *testing.T) {
	s := exampleSummary(SummarySucceeded, ExitOK, "ok")
	got, b, err := TruncateSummary(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Tables) != 2 || got.TablesOmitted != 0 || len(b) > MaxSummaryBytes {
		t.Errorf("tables=%d omitted=%d bytes=%d", len(got.Tables), got.TablesOmitted, len(b))
	}
}

func TestLargeSummaryKeepsTotalsAndAsManyTablesAsFit(t *testing.T) {
	s := exampleSummary(SummarySucceeded, ExitOK, "vacuumed 100 tables")
	s.Tables = nil
	for i := range 100 {
		s.Tables = append(s.Tables, exampleTable(fmt.Sprintf("table_%03d", i)))
	}
	s.Totals = exampleTotals(s.Tables...)
	got, b, err := TruncateSummary(s, MaxSummaryBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxSummaryBytes {
		t.Fatalf("encoded %d bytes, over %d", len(b), MaxSummaryBytes)
	}
	if len(got.Tables) == 0 || len(got.Tables)+got.TablesOmitted != 100 {
		t.Errorf("kept %d tables and omitted %d, want some kept and 100 in all", len(got.Tables), got.TablesOmitted)
	}
	// One more table must not have fitted.
	more := got
	more.Tables = s.Tables[:len(got.Tables)+1]
	if mb, _ := json.Marshal(more); len(mb) <= MaxSummaryBytes {
		t.Errorf("kept %d tables but %d would have fitted (%d bytes)", len(got.Tables), len(more.Tables), len(mb))
	}
	var decoded Summary
	if err := json.Unmarshal(b, &decoded); err != nil || !reflect.DeepEqual(decoded.Totals, s.Totals) || decoded.Tables[0].Table != "table_000" {
		t.Errorf("decoded summary lost totals or the first tables: %v", err)
	}
}

func TestHugeMessageIsShortenedOnlyWhenNothingElseFits(t *testing.T) {
	s := exampleSummary(SummaryFailed, ExitInternal, strings.Repeat("é", 5000))
	got, b, err := TruncateSummary(s, MaxSummaryBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > MaxSummaryBytes || len(got.Tables) != 0 || got.TablesOmitted != 2 {
		t.Errorf("bytes=%d tables=%d omitted=%d", len(b), len(got.Tables), got.TablesOmitted)
	}
	if !strings.HasSuffix(got.Message, "...") || len(b) < MaxSummaryBytes-8 {
		t.Errorf("message should be cut just enough to fit: %d bytes, suffix %q", len(b), got.Message[len(got.Message)-3:])
	}
}

func TestTruncatedSummaryNeverEncodesNullTables(t *testing.T) {
	_, b, err := TruncateSummary(Summary{Phase: SummaryFailed, ExitCode: ExitBadInput, Message: "unknown table"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"tables":[]`) {
		t.Errorf("want an empty tables list, got %s", b)
	}
}
