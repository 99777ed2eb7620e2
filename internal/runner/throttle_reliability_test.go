package runner

import (
	"encoding/json"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// FuzzThrottleBody sends arbitrary bodies to PUT /throttle with the right
// token: the handler answers 202 (accepted, a valid Throttle), 400 or 413,
// never panics, and what it accepts it echoes back as a Throttle that
// decodes again.
func FuzzThrottleBody(f *testing.F) {
	for _, s := range []string{`{}`, `{"costLimit":50}`, `{"costDelay":"2ms","maxReadBytesPerSecond":"50Mi"}`,
		`{"costDelay":"1s"}`, `{"delay":"1ms"}`, `{} {}`, `null`, `[`, `{"costLimit":-1}`, `{"costLimit":1e400}`, "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s := &runState{logf: func(string, ...any) {}}
		rec := do(t, newHandler(s, []byte("tok")), "PUT", "/throttle", "Bearer tok", string(body))
		switch rec.Code {
		case 202:
			var echo runnerwire.Throttle
			if err := json.Unmarshal(rec.Body.Bytes(), &echo); err != nil {
				t.Fatalf("accepted body %q echoed %q, not a Throttle: %v", body, rec.Body, err)
			}
			if s.takePending() == nil {
				t.Fatalf("accepted body %q but kept no throttle for the run", body)
			}
		case 400, 413:
		default:
			t.Fatalf("PUT /throttle %q = %d %s", body, rec.Code, rec.Body)
		}
	})
}
