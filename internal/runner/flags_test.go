package runner

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vacuumops/vacuum-operator/internal/cliflag"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

func TestFlagsOverrideOnlyTheSpecFieldsGivenOnTheCommandLine(t *testing.T) {
	fs := cliflag.NewSet("run")
	vf := addVacuumFlags(fs, true)
	if err := parseFlags(fs, []string{"--cost-limit", "500", "--max-wal-rate", "10Mi", "--table", "a", "--table", "b",
		"--no-truncate", "--mode", "FULL"}); err != nil {
		t.Fatal(err)
	}
	ring := resource.MustParse("4Mi")
	limit := int32(100)
	spec := runnerwire.RunSpec{DataDir: "/data", RingSize: &ring,
		Throttle: &runnerwire.Throttle{CostLimit: &limit, CostDelay: &metav1.Duration{Duration: 5 * time.Millisecond}}}
	vf.overlay(&spec)
	r, err := resolveSpec(spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.Throttle.CostLimit != 500 || r.Throttle.CostDelay != 5*time.Millisecond || r.Throttle.MaxWALBytesPerSecond != 10<<20 {
		t.Errorf("throttle %+v: want the flag's cost limit 500 and WAL rate 10Mi, the spec's 5ms delay", r.Throttle)
	}
	if r.RingSize != 4<<20 || r.Truncate || r.Mode != runnerwire.ModeFull || strings.Join(r.Tables, ",") != "a,b" {
		t.Errorf("resolved %+v: want the spec's 4Mi ring, truncation off, Full, tables a,b", r)
	}
	if r.BufferPoolSize != runnerwire.DefaultBufferPoolSize || r.Parallelism != 1 {
		t.Errorf("unset fields did not take their defaults: %+v", r)
	}
}

func TestBadVacuumFlagsNameTheFlagInOneLine(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--parallelism", "0", "--maintenance-work-mem", "1Ki"},
			[]string{"--parallelism: must be between 1 and 64, got 0", "--maintenance-work-mem: must be between 1Mi and 1Ti"}},
		{[]string{"--page-dirty-cost", "-1"}, []string{"--page-dirty-cost: must be between 0 and 10000"}},
		{[]string{"--max-read-rate", "-5Mi", "--data", "/d"}, []string{"--max-read-rate: must be a whole, non-negative"}},
		{[]string{"--table", ""}, []string{"--table: must not be empty"}},
		{[]string{"--data", "/d", "--mode", "sideways"}, []string{`--mode: must be Lazy or Full, got "sideways"`}},
	}
	for _, c := range cases {
		fs := cliflag.NewSet("run")
		vf := addVacuumFlags(fs, true)
		if err := parseFlags(fs, c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		var spec runnerwire.RunSpec
		vf.overlay(&spec)
		_, err := resolveSpec(spec, true)
		if err == nil {
			t.Fatalf("%v: no error", c.args)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("%v: message spans lines: %q", c.args, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: message %q lacks %q", c.args, msg, w)
			}
		}
	}
}
