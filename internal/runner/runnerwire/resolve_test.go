package runnerwire

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestResolveAppliesTheDocumentedDefaults(t *testing.T) {
	r, err := RunSpec{DataDir: "/data"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{CostDelay: 2 * time.Millisecond, CostLimit: 200, PageHitCost: 1, PageMissCost: 2, PageDirtyCost: 20}
	if r.Throttle != want {
		t.Errorf("throttle = %+v, want %+v", r.Throttle, want)
	}
	if r.Mode != ModeLazy || r.RingSize != 2<<20 || r.BufferPoolSize != 128<<20 || r.Parallelism != 1 ||
		r.IndexWorkers != 0 || r.MaintenanceWorkMem != 64<<20 || !r.Truncate || r.MinDeadTuplePercent != 0 {
		t.Errorf("defaults = %+v", r)
	}
	if len(r.Tables) != 0 || len(r.TableThrottles) != 0 {
		t.Errorf("no tables and no overrides expected, got %v and %v", r.Tables, r.TableThrottles)
	}
}

func TestResolveKeepsEveryValueOfTheGoldenSpec(t *testing.T) {
	r, err := exampleRunSpec().Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Throttle.MaxReadBytesPerSecond != 50<<20 || r.Throttle.MaxWALBytesPerSecond != 10<<20 || r.Parallelism != 2 {
		t.Errorf("resolved = %+v", r)
	}
}

func TestTableOverrideInheritsUnsetFieldsFromTheRun(t *testing.T) {
	r, err := exampleRunSpec().Resolve()
	if err != nil {
		t.Fatal(err)
	}
	events := r.LimitsFor("events")
	want := r.Throttle
	want.CostDelay = 10 * time.Millisecond
	if events != want {
		t.Errorf("events limits = %+v, want the run's with a 10ms delay: %+v", events, want)
	}
	if r.LimitsFor("orders") != r.Throttle {
		t.Errorf("a table without override must get the run's limits")
	}
}

func TestModeIsCaseInsensitiveOnInput(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeLazy, "lazy": ModeLazy, "LAZY": ModeLazy, "Full": ModeFull, "full": ModeFull} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseMode("analyze"); err == nil {
		t.Error("ParseMode accepted analyze")
	}
}

func TestResolveRejectsOutOfRangeValuesNamingFieldAndRange(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*RunSpec)
		field string
		msg   string
	}{
		{"missing data dir", func(s *RunSpec) { s.DataDir = "" }, "dataDir", "required"},
		{"unknown mode", func(s *RunSpec) { s.Mode = "Analyze" }, "mode", "Lazy or Full"},
		{"delay over 100ms", func(s *RunSpec) { s.Throttle.CostDelay = &metav1.Duration{Duration: 101 * time.Millisecond} },
			"throttle.costDelay", "between 0 and 100ms"},
		{"negative delay", func(s *RunSpec) { s.Throttle.CostDelay = &metav1.Duration{Duration: -time.Millisecond} },
			"throttle.costDelay", "between 0 and 100ms"},
		{"cost limit 0", func(s *RunSpec) { s.Throttle.CostLimit = ptr.To[int32](0) }, "throttle.costLimit", "between 1 and 10000"},
		{"cost limit too high", func(s *RunSpec) { s.Throttle.CostLimit = ptr.To[int32](10001) }, "throttle.costLimit", "between 1 and 10000"},
		{"negative hit cost", func(s *RunSpec) { s.Throttle.PageHitCost = ptr.To[int32](-1) }, "throttle.pageHitCost", "between 0 and 10000"},
		{"negative read rate", func(s *RunSpec) { s.Throttle.MaxReadBytesPerSecond = qty("-1") }, "throttle.maxReadBytesPerSecond", "non-negative"},
		{"fractional write rate", func(s *RunSpec) { s.Throttle.MaxWriteBytesPerSecond = qty("0.5") }, "throttle.maxWriteBytesPerSecond", "whole"},
		{"ring too small", func(s *RunSpec) { s.RingSize = qty("64Ki") }, "ringSize", "0 or between 128Ki and 16Gi"},
		{"ring too big", func(s *RunSpec) { s.RingSize = qty("17Gi") }, "ringSize", "0 or between 128Ki and 16Gi"},
		{"pool too small", func(s *RunSpec) { s.BufferPoolSize = qty("512Ki") }, "bufferPoolSize", "between 1Mi and 1Ti"},
		{"parallelism 0", func(s *RunSpec) { s.Parallelism = ptr.To[int32](0) }, "parallelism", "between 1 and 64"},
		{"parallelism 65", func(s *RunSpec) { s.Parallelism = ptr.To[int32](65) }, "parallelism", "between 1 and 64"},
		{"index workers 65", func(s *RunSpec) { s.IndexWorkers = ptr.To[int32](65) }, "indexWorkers", "between 0 and 64"},
		{"work mem too small", func(s *RunSpec) { s.MaintenanceWorkMem = qty("1Ki") }, "maintenanceWorkMem", "between 1Mi and 1Ti"},
		{"dead percent 101", func(s *RunSpec) { s.MinDeadTuplePercent = ptr.To[int32](101) }, "minDeadTuplePercent", "between 0 and 100"},
		{"empty table name", func(s *RunSpec) { s.Tables = []string{""} }, "tables[0]", "empty"},
		{"long table name", func(s *RunSpec) { s.Tables = []string{strings.Repeat("t", 64)} }, "tables[0]", "at most 63"},
		{"override delay", func(s *RunSpec) { s.TableOverrides[0].Throttle.CostDelay = &metav1.Duration{Duration: time.Second} },
			"tableOverrides[0].throttle.costDelay", "between 0 and 100ms"},
		{"duplicate override", func(s *RunSpec) { s.TableOverrides = append(s.TableOverrides, s.TableOverrides[0]) },
			"tableOverrides[1].table", "already has an override"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := exampleRunSpec()
			c.edit(&s)
			_, err := s.Resolve()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Resolve accepted the spec (err %v)", err)
			}
			if fe.Field != c.field || !strings.Contains(fe.Message, c.msg) {
				t.Errorf("error %q, want field %s with %q", err, c.field, c.msg)
			}
		})
	}
}

func TestRingSizeZeroMeansNoRingAndIsAccepted(t *testing.T) {
	s := exampleRunSpec()
	s.RingSize = qty("0")
	if r, err := s.Resolve(); err != nil || r.RingSize != 0 {
		t.Fatalf("ring 0: %d, %v", r.RingSize, err)
	}
}

func TestThrottleOverLeavesUnsetFieldsAtTheBase(t *testing.T) {
	base := DefaultLimits()
	base.MaxWALBytesPerSecond = 1 << 20
	th := exampleThrottle()
	got, err := th.Over(base, "throttle")
	if err != nil {
		t.Fatal(err)
	}
	want := base
	want.CostDelay, want.CostLimit, want.MaxReadBytesPerSecond = 5*time.Millisecond, 400, 100<<20
	if got != want {
		t.Errorf("Over = %+v, want %+v", got, want)
	}
	full := got.Throttle()
	again, err := full.Over(Limits{}, "throttle")
	if err != nil || again != got {
		t.Errorf("a fully set Throttle must resolve to itself over any base: %+v, %v", again, err)
	}
}

func TestMemoryRequirementIsPoolPlusWorkersTimesWorkMemPlusOverhead(t *testing.T) {
	s := exampleRunSpec() // pool 128Mi, parallelism 2, work mem 64Mi
	r, err := s.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := MemoryRequirement(r), int64(128+2*64+64)<<20; got != want {
		t.Errorf("MemoryRequirement = %d, want %d", got, want)
	}
}
