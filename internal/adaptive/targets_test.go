package adaptive

import (
	"reflect"
	"testing"
	"time"
)

func TestSignalsHoldEachSetTargetInTheOrderSamplesComeIn(t *testing.T) {
	latency := Signal{Binding: ForegroundLatency, Kind: Level, Target: 0.02}
	bytes := Signal{Binding: ReplicationLag, Kind: Integrating, Target: 1 << 20}
	delay := Signal{Binding: ReplicationLag, Kind: Integrating, Target: 2}
	for _, c := range []struct {
		name string
		t    Targets
		want []Signal
	}{
		{"none set", Targets{}, nil},
		{"latency only", Targets{Latency: 20 * time.Millisecond}, []Signal{latency}},
		{"lag bytes only", Targets{LagBytes: 1 << 20}, []Signal{bytes}},
		{"all three, latency first", Targets{LagDelay: 2 * time.Second, LagBytes: 1 << 20, Latency: 20 * time.Millisecond}, []Signal{latency, bytes, delay}},
		{"lag delay and latency", Targets{LagDelay: 2 * time.Second, Latency: 20 * time.Millisecond}, []Signal{latency, delay}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.t.Signals(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Signals() = %+v, want %+v", got, c.want)
			}
		})
	}
}
