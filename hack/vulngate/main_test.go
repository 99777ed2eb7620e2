package main

import (
	"bytes"
	"strings"
	"testing"
)

// The objects below have the shape govulncheck v1.9.0 writes with -format json (trimmed to the
// fields the gate reads): a module-level finding has no package or function, a called one
// names its function.
const (
	osvStd    = `{"osv":{"id":"GO-2026-6607","summary":"Reject malformed ECH outer extension references in crypto/tls"}}`
	calledStd = `{"finding":{"osv":"GO-2026-6607","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"crypto/tls","function":"HandshakeContext","receiver":"*Conn"},{"module":"github.com/vacuumops/vacuum-operator","package":"x","function":"y"}]}}`
	calledMod = `{"finding":{"osv":"GO-2026-6865","fixed_version":"v1.20.2","trace":[{"module":"github.com/klauspost/compress","version":"v1.20.1","package":"github.com/klauspost/compress/zstd","function":"Decode","receiver":"*Decoder"}]}}`
	onlyMod   = `{"finding":{"osv":"GO-2026-4961","fixed_version":"v0.42.0","trace":[{"module":"golang.org/x/image","version":"v0.39.0"}]}}`
	onlyPkg   = `{"finding":{"osv":"GO-2026-5032","fixed_version":"v0.41.0","trace":[{"module":"golang.org/x/image","version":"v0.39.0","package":"golang.org/x/image/tiff"}]}}`
	progress  = `{"progress":{"message":"Scanning your code and 600 packages across 80 dependent modules for known vulnerabilities..."}}`
)

func TestGateFailsOnCalledVulnerabilitiesNotOnImportedOnes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stream      []string
		allowStdlib bool
		code        int
		contains    []string
	}{
		{"empty", nil, false, 0, []string{"ok: no reachable vulnerabilities"}},
		{"imported or required only", []string{progress, onlyMod, onlyPkg}, false, 0, []string{"module dependencies: 0"}},
		{"stdlib called, strict", []string{osvStd, calledStd, calledStd}, false, 1,
			[]string{"standard library: 1", "GO-2026-6607 stdlib@v1.26.8 (fixed in v1.26.9) via crypto/tls.*Conn.HandshakeContext: Reject malformed ECH"}},
		{"stdlib called, allowed", []string{osvStd, calledStd}, true, 0, []string{"need a newer Go toolchain"}},
		{"module called fails even when stdlib allowed", []string{calledMod, calledStd}, true, 1,
			[]string{"module dependencies: 1", "GO-2026-6865 github.com/klauspost/compress@v1.20.1 (fixed in v1.20.2)", "FAIL: upgrade the modules"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := gate(strings.NewReader(strings.Join(tc.stream, "\n")), &out, tc.allowStdlib)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.code, out.String())
			}
			for _, s := range tc.contains {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
}

func TestGateRejectsGarbage(t *testing.T) {
	if _, err := gate(strings.NewReader(`{"finding": [`), &bytes.Buffer{}, false); err == nil {
		t.Fatal("truncated JSON was accepted")
	}
}
