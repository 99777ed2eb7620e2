package e2ereal

import "testing"

// The /proc parsing the security assertions rely on, checked on fixed input: it runs in
// `go test ./...` too, without a cluster.
func TestRootMountReadOnlyReadsTheMountInEffectAtSlash(t *testing.T) {
	cases := []struct {
		name, mountinfo string
		want            bool
	}{
		{"read-only overlay root",
			"1200 1100 0:99 / / ro,relatime - overlay overlay rw,lowerdir=/l\n1201 1200 0:5 / /proc rw - proc proc rw\n", true},
		{"writable root",
			"1200 1100 0:99 / / rw,relatime - overlay overlay rw\n", false},
		{"remounted read-only over a writable one",
			"1200 1100 0:99 / / rw - overlay overlay rw\n1300 1200 0:99 / / ro,nosuid - overlay overlay rw\n", true},
		{"ro only on another mount",
			"1200 1100 0:99 / / rw - overlay overlay rw\n1201 1200 0:50 / /data ro - ext4 /dev/vda rw\n", false},
		{"empty", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := rootMountReadOnly(c.mountinfo); got != c.want {
				t.Errorf("rootMountReadOnly = %v, want %v", got, c.want)
			}
		})
	}
}
