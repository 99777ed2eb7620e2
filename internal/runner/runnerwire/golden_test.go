package runnerwire

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the examples")

// goldens maps each golden file to the example it holds and a fresh value to decode it into.
var goldens = []struct {
	file    string
	example func() any
	decoded func() any
}{
	{"runspec.json", func() any { return exampleRunSpec() }, func() any { return &RunSpec{} }},
	{"runspec-server.json", func() any { return exampleServerRunSpec() }, func() any { return &RunSpec{} }},
	{"throttle.json", func() any { return exampleThrottle() }, func() any { return &Throttle{} }},
	{"progress.json", func() any { return exampleProgress() }, func() any { return &Progress{} }},
	{"report.json", func() any { return exampleReport() }, func() any { return &Report{} }},
	{"summary-succeeded.json", func() any { return exampleSummary(SummarySucceeded, ExitOK, "vacuumed 2 tables") },
		func() any { return &Summary{} }},
	{"summary-corruption.json", func() any {
		s := exampleSummary(SummaryFailed, ExitCorruption, "corruption: checksum mismatch in base/16384/16390 block 17")
		s.Tables = s.Tables[:1]
		s.Totals = exampleTotals(s.Tables...)
		return s
	}, func() any { return &Summary{} }},
	{"summary-window-closed.json", func() any {
		s := exampleSummary(SummarySucceeded, ExitOK, "stopped at the window's end: 1 of 2 tables complete")
		s.StopReason = StopReasonWindowClosed
		s.Tables[1].Complete, s.Tables[1].BlockReached, s.Tables[1].ResumedFromBlock = false, 5200, 2100
		s.Tables[1].PagesScanned = 3100
		s.Totals = exampleTotals(s.Tables...)
		return s
	}, func() any { return &Summary{} }},
	{"summary-cancelled.json", func() any {
		s := exampleSummary(SummaryCancelled, ExitCancelled, "cancelled by SIGTERM")
		s.Tables = s.Tables[:1]
		s.Totals = exampleTotals(s.Tables...)
		return s
	}, func() any { return &Summary{} }},
}

func encodeIndented(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return append(b, '\n')
}

func TestGoldenFilesDecodeStrictlyAndReencodeUnchanged(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.file, func(t *testing.T) {
			path := filepath.Join("testdata", g.file)
			if *update {
				if err := os.WriteFile(path, encodeIndented(t, g.example()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run go test -update to create it): %v", err)
			}
			v := g.decoded()
			dec := json.NewDecoder(bytes.NewReader(want))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("golden %s does not decode into %T: %v", g.file, v, err)
			}
			if got := encodeIndented(t, v); !bytes.Equal(got, want) {
				t.Errorf("golden %s changes on a round trip through %T:\n got: %s\nwant: %s", g.file, v, got, want)
			}
		})
	}
}

func TestOutputTypesNeverOmitAFieldAndInputTypesAlwaysDo(t *testing.T) {
	outputs := []any{Progress{}, TableProgress{}, Summary{}, Report{}, TableResult{}, Totals{}, Rate{}, IndexResult{}, ServerIdentity{}, Foreground{}, Replication{}}
	for _, v := range outputs {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			if tag := typ.Field(i).Tag.Get("json"); tag == "" || strings.Contains(tag, "omitempty") {
				t.Errorf("output %s.%s has json tag %q: outputs must name every field and never omit it",
					typ.Name(), typ.Field(i).Name, tag)
			}
		}
	}
	for _, v := range []any{RunSpec{}, Throttle{}, ServerTarget{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			if tag := typ.Field(i).Tag.Get("json"); !strings.HasSuffix(tag, ",omitempty") {
				t.Errorf("input %s.%s has json tag %q: an absent input must mean the default", typ.Name(), typ.Field(i).Name, tag)
			}
		}
	}
}

func TestZeroProgressStillCarriesEveryField(t *testing.T) {
	b, err := json.Marshal(Progress{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if got, want := len(m), reflect.TypeOf(Progress{}).NumField(); got != want {
		t.Errorf("zero Progress encodes %d fields, want %d: %s", got, want, b)
	}
}

func TestRunSpecGoldenUsesStringsForDurationsAndQuantities(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "runspec.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Throttle map[string]any `json:"throttle"`
		RingSize any            `json:"ringSize"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"costDelay", "maxReadBytesPerSecond"} {
		if _, ok := m.Throttle[k].(string); !ok {
			t.Errorf("throttle.%s is %T in the golden RunSpec, want a string", k, m.Throttle[k])
		}
	}
	if m.Throttle["costDelay"] != "2ms" || m.RingSize != "2Mi" {
		t.Errorf("costDelay=%v ringSize=%v, want 2ms and 2Mi", m.Throttle["costDelay"], m.RingSize)
	}
	if _, ok := m.Throttle["costLimit"].(float64); !ok {
		t.Errorf("throttle.costLimit is %T, want a JSON number", m.Throttle["costLimit"])
	}
}
