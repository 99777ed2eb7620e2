package cliflag

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

func TestQuantityFlagParsesKubernetesQuantitiesAndRefusesOthers(t *testing.T) {
	for _, tc := range []struct {
		arg   string
		bytes int64
		ok    bool
	}{
		{"128Mi", 128 << 20, true},
		{"2Gi", 2 << 30, true},
		{"0", 0, true},
		{"1.5Mi", 3 << 19, true},
		{"128MB!", 0, false},
		{"", 0, false},
	} {
		v := Quantity{Value: resource.MustParse("7")}
		fs := NewSet("test")
		fs.Var(&v, "size", "a size")
		err := fs.Parse([]string{"--size=" + tc.arg})
		if (err == nil) != tc.ok {
			t.Errorf("--size=%q: err = %v, want ok = %v", tc.arg, err, tc.ok)
			continue
		}
		if !tc.ok {
			if v.Value.Value() != 7 {
				t.Errorf("--size=%q refused but changed the value to %s", tc.arg, v.String())
			}
			continue
		}
		if got := v.Value.Value(); got != tc.bytes {
			t.Errorf("--size=%q = %d bytes, want %d", tc.arg, got, tc.bytes)
		}
	}
}
