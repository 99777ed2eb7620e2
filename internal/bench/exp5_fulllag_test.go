package bench

import (
	"math"
	"testing"
	"time"
)

// lagRun is a fullRun of samples every 100 ms: FULL from 0.1 to 0.6 s, writing 20 MB/s, the
// standby 2 MiB behind and replaying 10 MB/s while it runs, then catching up at 100 MB/s.
func lagRun() fullRun {
	f := fullRun{fullStart: 100 * time.Millisecond, fullEnd: 600 * time.Millisecond}
	cur, rep := uint64(100<<20), uint64(100<<20)
	for i := range 12 {
		at := time.Duration(i) * 100 * time.Millisecond
		switch {
		case i == 1:
			rep -= 2 << 20 // behind when FULL starts
		case i > 1 && i <= 6:
			cur += 2_000_000
			rep += 1_000_000
		case i > 6:
			rep = min(cur, rep+10_000_000)
		}
		f.samples = append(f.samples, LagSample{At: at, Current: cur, Replayed: rep})
	}
	return f
}

func TestApplyRateIsTheReplayRateBesideTheFullNotTheCatchUpAfterIt(t *testing.T) {
	rate, ok := lagRun().applyRate()
	if !ok {
		t.Fatal("the standby was behind for the whole FULL, yet no apply rate")
	}
	if math.Abs(rate-10e6) > 1 {
		t.Fatalf("apply rate %.0f B/s, want 10000000 (its replay beside the FULL, not the 100 MB/s catch-up)", rate)
	}
}

func TestApplyRateIsUnknownWhenTheStandbyKeptUpWhileTheFullRan(t *testing.T) {
	f := lagRun()
	for i := range f.samples {
		if f.during(f.samples[i]) {
			f.samples[i].Replayed = f.samples[i].Current // kept up; behind only after
		}
	}
	f.samples[7].Replayed -= 4 << 20
	if rate, ok := f.applyRate(); ok {
		t.Fatalf("apply rate %.0f B/s from the stretch after FULL, want none (kept up while it ran)", rate)
	}
}
