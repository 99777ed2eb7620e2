package localnode

import "strings"

// expand replaces $(NAME) references in s as a kubelet does: a defined NAME is replaced by
// its value, an undefined one is left as written, and $$ is an escaped $ (so $$(NAME) yields
// the literal $(NAME)). A lone $ or an unterminated $( is kept as is.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// pathRewriter maps container paths (mount points, the termination message path) to host
// paths inside arbitrary strings.
type pathRewriter struct {
	// from is sorted longest first, so /var/run/x wins over /var; to[i] replaces from[i].
	from, to []string
}

// add registers a container path and its host path. The container path is cleaned of a
// trailing slash; "/" itself is never rewritten (it would match everything).
func (r *pathRewriter) add(containerPath, hostPath string) {
	containerPath = strings.TrimRight(containerPath, "/")
	if containerPath == "" {
		return
	}
	i := 0
	for i < len(r.from) && len(r.from[i]) >= len(containerPath) {
		i++
	}
	r.from = append(r.from[:i], append([]string{containerPath}, r.from[i:]...)...)
	r.to = append(r.to[:i], append([]string{hostPath}, r.to[i:]...)...)
}

// rewrite replaces each occurrence of a registered container path that stands as a whole
// path: preceded by the start of s or a separator character, and followed by the end of s, a
// slash or a separator. So "--data=/data/x", `{"dataDir":"/data"}` and "/data" are rewritten,
// "/database" and "/my/data" are not.
func (r *pathRewriter) rewrite(s string) string {
	if len(r.from) == 0 {
		return s
	}
	var b strings.Builder
	i := 0
outer:
	for i < len(s) {
		if s[i] == '/' && (i == 0 || isSeparator(s[i-1])) {
			for k, from := range r.from {
				if !strings.HasPrefix(s[i:], from) {
					continue
				}
				j := i + len(from)
				if j == len(s) || s[j] == '/' || isSeparator(s[j]) {
					b.WriteString(r.to[k])
					i = j
					continue outer
				}
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// isSeparator reports whether c may delimit a path inside an argument, an env value or JSON.
func isSeparator(c byte) bool {
	switch c {
	case '"', '\'', '=', ':', ',', ' ', '\t', '\n', '[', ']', '{', '}', '(', ')', ';':
		return true
	}
	return false
}
