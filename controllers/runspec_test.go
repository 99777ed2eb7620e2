package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

func TestThrottleEventNamesEveryFieldSetInDeclarationOrder(t *testing.T) {
	wal := resource.MustParse("8Mi")
	th := vacuumv1alpha1.Throttle{CostDelay: &metav1.Duration{Duration: 2 * time.Millisecond},
		CostLimit: ptr.To(int32(200)), MaxWALBytesPerSecond: &wal}
	if got, want := describeThrottle(&th), "costDelay=2ms costLimit=200 maxWALBytesPerSecond=8Mi"; got != want {
		t.Errorf("describeThrottle = %q, want %q", got, want)
	}
}

func TestPolicyThrottlePatchNullsWhatThePolicyNoLongerSets(t *testing.T) {
	read, wal := resource.MustParse("1Mi"), resource.MustParse("2Mi")
	run := vacuumv1alpha1.Throttle{CostLimit: ptr.To(int32(100)), MaxReadBytesPerSecond: &read, MaxWALBytesPerSecond: &wal}
	policy := vacuumv1alpha1.Throttle{CostLimit: ptr.To(int32(300)), MaxWALBytesPerSecond: &wal}
	p := throttlePatch(&run, &policy)
	if v, ok := p["maxReadBytesPerSecond"]; !ok || v != nil {
		t.Errorf("patch %v: want maxReadBytesPerSecond: null", p)
	}
	if p["costLimit"] != float64(300) || p["maxWALBytesPerSecond"] != "2Mi" {
		t.Errorf("patch %v: want the policy's costLimit 300 and WAL rate 2Mi", p)
	}
	if len(p) != 3 {
		t.Errorf("patch %v: want exactly three fields", p)
	}
}
