package localnode

import "testing"

func TestExpandFollowsKubeletRules(t *testing.T) {
	env := map[string]string{"POD_IP": "127.0.0.2", "NAME": "run-1", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cases := []struct{ in, want string }{
		{"--listen=$(POD_IP):8080", "--listen=127.0.0.2:8080"},
		{"$(NAME)-$(NAME)", "run-1-run-1"},
		{"$(UNDEFINED) stays", "$(UNDEFINED) stays"},
		{"$$(POD_IP) is escaped", "$(POD_IP) is escaped"},
		{"$$$(POD_IP)", "$127.0.0.2"},
		{"cost $5 and $", "cost $5 and $"},
		{"unterminated $(POD_IP", "unterminated $(POD_IP"},
		{"[$(EMPTY)]", "[]"},
		{"no references", "no references"},
	}
	for _, c := range cases {
		if got := expand(c.in, lookup); got != c.want {
			t.Errorf("expand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRewriteReplacesWholeMountPathsOnly(t *testing.T) {
	var r pathRewriter
	r.add("/data", "/host/pv")
	r.add("/var/run/vacuum/token/", "/state/token")
	r.add("/dev/termination-log", "/state/tlog")
	r.add("/", "/never")
	cases := []struct{ in, want string }{
		{"/data", "/host/pv"},
		{"--data=/data/sub", "--data=/host/pv/sub"},
		{`{"dataDir":"/data","mode":"Lazy"}`, `{"dataDir":"/host/pv","mode":"Lazy"}`},
		{"/database", "/database"},
		{"/my/data", "/my/data"},
		{"/var/run/vacuum/token/token", "/state/token/token"},
		{"/dev/termination-log", "/state/tlog"},
		{"a /data b", "a /host/pv b"},
		{"relative/data", "relative/data"},
	}
	for _, c := range cases {
		if got := r.rewrite(c.in); got != c.want {
			t.Errorf("rewrite(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
