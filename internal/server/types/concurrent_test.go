package types

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestBinaryFormatsAreSafeForConcurrentConnections formats and parses values of several
// types in binary from many goroutines at once, as the server's connections do; under -race
// it fails if the codecs share state unguarded (a shared pgtype.Map did: make test's race
// detector caught it beside the adaptive-throttle test's concurrent sessions).
func TestBinaryFormatsAreSafeForConcurrentConnections(t *testing.T) {
	ts := time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		t *T
		v any
	}{
		{Int8, int64(1 << 40)}, {Int4, int64(7)}, {Int2, int64(-3)}, {Bool, true},
		{Text, "text"}, {Bytea, []byte{0, 1, 2}}, {Timestamp, ts}, {Timestamptz, ts},
	}
	// The expected bytes come from a Map of the test's own, so the goroutines below are the
	// first users of the package's codecs (this file sorts before the fuzz seeds' file) and
	// fill their plan caches concurrently, where sharing one Map races.
	ref := pgtype.NewMap()
	want := make([][]byte, len(cases))
	for i, c := range cases {
		b, err := ref.Encode(c.t.OID, pgtype.BinaryFormatCode, c.v, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.t.Name, err)
		}
		want[i] = b
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan string, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for n := range 300 {
				i := (g + n) % len(cases)
				c := cases[i]
				b, err := FormatBinary(c.t, c.v)
				if err != nil || !bytes.Equal(b, want[i]) {
					errs <- c.t.Name + ": formatted differently under concurrency"
					return
				}
				if _, err := Parse(c.t, pgtype.BinaryFormatCode, b); err != nil {
					errs <- c.t.Name + ": " + err.Error()
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
