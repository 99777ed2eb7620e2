package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// The golden files hold the real binary's JSON outputs, with volatile numbers normalised.
// They live beside the wire types (internal/runner/runnerwire/testdata) because the operator's
// tests read them too. Regenerate with:
//
//	go test ./cmd/vacuum-runner -run TestGolden -update
var update = flag.Bool("update", false, "rewrite internal/runner/runnerwire/testdata/*.golden.json from the binary's outputs")

var goldenDir = filepath.Join("..", "..", "internal", "runner", "runnerwire", "testdata")

// Keys whose numbers change from run to run, and the value the golden files show instead.
var volatile = map[string]float64{
	"elapsedSeconds": 1.5, "sleptSeconds": 0.5, "totalSeconds": 1.5, "loadSeconds": 1.25,
	"pagesPerSecond": 1000.5, "readBytesPerSecond": 1048576.5, "writeBytesPerSecond": 524288.5,
	"walBytesPerSecond": 262144.5, "rowsPerSecond": 20000.5, "achieved": 1000.5, "percent": 50.5,
	"bytesRead": 8192000, "bytesWritten": 4096000, "walBytes": 2048000, "walFlushes": 10, "walRecords": 1000,
	"walFullPageImages": 100, "ringDirtyEvictions": 50, "bufferHits": 2000, "bufferMisses": 1000,
	"buffersDirtied": 500,
}

// Mid-run progress: every counter is volatile, not only the usual ones.
var volatileProgress = map[string]float64{
	"heapBlocksScanned": 300, "heapBlocksVacuumed": 0, "indexPasses": 0, "deadTuples": 1200,
	"deadTupleBytes": 65536, "tuplesRemoved": 0, "tablesDone": 0,
}

// A run stopped by a signal stops at a moment that varies.
var volatileStopped = map[string]float64{
	"pagesScanned": 3, "pagesRemaining": 0, "tuplesRemoved": 50, "tuplesRemaining": 100, "entriesRemoved": 0,
	"pages": 0, "indexPasses": 0,
}

var secondsInText = regexp.MustCompile(`\d+(\.\d+)?s\b`)

// normalise replaces volatile numbers (by key) and durations in messages, and the data
// directory in file names, throughout the decoded JSON v.
func normalise(v any, key string, extra map[string]float64, dataDir string) any {
	switch x := v.(type) {
	case object:
		for i, m := range x {
			x[i].Val = normalise(m.Val, m.Key, extra, dataDir)
		}
	case []any:
		for i, e := range x {
			x[i] = normalise(e, key, extra, dataDir)
		}
	case float64:
		if r, ok := extra[key]; ok {
			return r
		}
		if r, ok := volatile[key]; ok {
			return r
		}
	case string:
		if dataDir != "" {
			x = strings.ReplaceAll(x, dataDir, "/data")
		}
		if key == "message" {
			x = secondsInText.ReplaceAllString(x, "1.5s")
		}
		return x
	}
	return v
}

// shape maps every path of a JSON value to its type; arrays add "[]" for their elements.
// empty collects the paths of empty arrays.
func shape(v any, path string, out map[string]string, empty map[string]bool) {
	switch x := v.(type) {
	case object:
		out[path] = "object"
		for _, m := range x {
			shape(m.Val, path+"."+m.Key, out, empty)
		}
	case []any:
		out[path] = "array"
		if len(x) == 0 {
			empty[path] = true
		}
		for _, e := range x {
			shape(e, path+"[]", out, empty)
		}
	case float64:
		out[path] = "number"
	case string:
		out[path] = "string"
	case bool:
		out[path] = "bool"
	case nil:
		out[path] = "null"
	}
}

// shapeDiff lists how got's shape differs from want's; paths under an array empty in got
// are not required.
func shapeDiff(want, got any) []string {
	ws, gs := map[string]string{}, map[string]string{}
	wEmpty, gEmpty := map[string]bool{}, map[string]bool{}
	shape(want, "$", ws, wEmpty)
	shape(got, "$", gs, gEmpty)
	var diffs []string
	underEmpty := func(p string, empty map[string]bool) bool {
		for e := range empty {
			if strings.HasPrefix(p, e+"[]") {
				return true
			}
		}
		return false
	}
	for p, wt := range ws {
		gt, ok := gs[p]
		switch {
		case !ok && !underEmpty(p, gEmpty):
			diffs = append(diffs, fmt.Sprintf("missing %s (%s)", p, wt))
		case ok && gt != wt:
			diffs = append(diffs, fmt.Sprintf("%s is %s, golden has %s", p, gt, wt))
		}
	}
	for p, gt := range gs {
		if _, ok := ws[p]; !ok && !underEmpty(p, wEmpty) {
			diffs = append(diffs, fmt.Sprintf("unexpected %s (%s)", p, gt))
		}
	}
	sort.Strings(diffs)
	return diffs
}

// golden writes (with -update) or checks the shape of output against <name>.golden.json.
func golden(t *testing.T, name, output string, extra map[string]float64, dataDir string) {
	t.Helper()
	v, err := parseOrdered([]byte(output))
	if err != nil {
		t.Fatalf("%s: output is not JSON: %v\n%s", name, err, output)
	}
	v = normalise(v, "", extra, dataDir)
	path := filepath.Join(goldenDir, name+".golden.json")
	if *update {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s (regenerate with go test ./cmd/vacuum-runner -run TestGolden -update): %v", name, err)
	}
	want, err := parseOrdered(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d := shapeDiff(want, v); len(d) > 0 {
		t.Errorf("%s: the binary's output no longer has the golden shape (regenerate with -update if intended):\n  %s",
			name, strings.Join(d, "\n  "))
	}
}

func TestGoldenOutputsKeepTheirShape(t *testing.T) {
	dir := copyFixture(t)
	golden(t, "stats", mustVR(t, "stats", "--data", dir, "--json").stdout, nil, dir)
	golden(t, "vacuum", mustVR(t, "vacuum", "--data", dir, "--json", "--cost-delay", "0").stdout, nil, dir)
	golden(t, "check", mustVR(t, "check", "--data", dir, "--json").stdout, nil, dir)
	golden(t, "full", mustVR(t, "full", "--data", dir, "--json", "--cost-delay", "0").stdout, nil, dir)

	small := filepath.Join(t.TempDir(), "small")
	mustVR(t, "init", "--data", small)
	golden(t, "bloat", mustVR(t, "bloat", "--data", small, "--table", "t", "--rows", "1000", "--json").stdout, nil, small)

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("golden"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSlowRun(t, "--control-token-file", tokenFile, "--max-read-rate", "50Mi")
	s.waitProgress(t, func(p runnerwire.Progress) bool { return p.Phase == runnerwire.PhaseScanningHeap })
	var buf bytes.Buffer
	getJSONRaw(t, "http://"+s.addr+"/progress", &buf)
	golden(t, "progress", buf.String(), volatileProgress, s.dir)
	if code, body := put(t, "http://"+s.addr+"/throttle", "Bearer golden", `{"costDelay":"0s"}`); code != 200 {
		t.Fatalf("PUT /throttle: %d %s", code, body)
	}
	if rc := s.p.wait(t, 30*time.Second); rc != 0 {
		t.Fatalf("run exit %d: %s", rc, s.p.stderr.String())
	}
	sum, err := os.ReadFile(s.log)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "summary", string(sum), nil, s.dir)

	c := startSlowRun(t)
	if err := c.p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if rc := c.p.wait(t, 10*time.Second); rc != runnerwire.ExitCancelled {
		t.Fatalf("run after SIGINT: exit %d, want 5", rc)
	}
	sum, err = os.ReadFile(c.log)
	if err != nil {
		t.Fatal(err)
	}
	// Named after the wire phase "Cancelled", like api/testdata/summary-cancelled.json.
	golden(t, "summary-cancelled", string(sum), volatileStopped, c.dir)

	bad := copyFixture(t)
	corruptBlock(t, heapFile(t, bad), 1)
	r := vr(t, nil, "check", "--data", bad, "--json")
	if r.code != runnerwire.ExitCorruption {
		t.Fatalf("check of a corrupted copy: exit %d", r.code)
	}
	golden(t, "check-corrupt", r.stdout, nil, bad)
}

// getJSONRaw GETs url into buf.
func getJSONRaw(t *testing.T, url string, buf *bytes.Buffer) {
	t.Helper()
	var v json.RawMessage
	getJSON(t, url, &v)
	buf.Write(v)
}

func TestShapeDiffReportsMissingExtraAndRetypedKeys(t *testing.T) {
	parse := func(s string) any {
		v, err := parseOrdered([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := parse(`{"a":1,"b":"x","list":[{"c":true}],"none":[{"d":1}]}`)
	cases := []struct {
		name, got string
		diffs     int
	}{
		{"same shape, other values", `{"a":2,"b":"y","list":[{"c":false},{"c":true}],"none":[]}`, 0},
		{"missing key", `{"b":"y","list":[{"c":false}],"none":[]}`, 1},
		{"extra key", `{"a":2,"b":"y","z":0,"list":[{"c":false}],"none":[]}`, 1},
		{"retyped key", `{"a":"2","b":"y","list":[{"c":false}],"none":[]}`, 1},
		{"retyped element key", `{"a":2,"b":"y","list":[{"c":1}],"none":[]}`, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := shapeDiff(want, parse(c.got)); len(d) != c.diffs {
				t.Errorf("shapeDiff = %v, want %d differences", d, c.diffs)
			}
		})
	}
}
