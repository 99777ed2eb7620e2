// Command podhelper is the local node tests' container: it reports what it sees (its args,
// its environment, files it was asked to read, an address it could listen on) as JSON
// in the termination message file, and exits as told.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	term := flag.String("term", "", "termination message file for the JSON report")
	listen := flag.String("listen", "", "address to listen on")
	sleep := flag.Duration("sleep", 0, "time to sleep before exiting")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	exit := flag.Int("exit", 0, "exit code")
	flag.String("spec", "", "ignored: present to show how JSON arguments are rewritten")
	var reads, writes multi
	flag.Var(&reads, "read", "file to include in the report (repeatable)")
	flag.Var(&writes, "write", "PATH=CONTENT to write (repeatable)")
	fill := flag.String("fill", "", "PATH=BYTES: write that many bytes to PATH before sleeping")
	unlinked := flag.Bool("unlinked", false, "with --fill: unlink the file first and keep it open, as a sort run is")
	flag.Parse()
	// Signal handling first: the report printed below tells tests it is in place.
	sigs := make(chan os.Signal, 1)
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGTERM)
	}

	report := map[string]any{"args": os.Args[1:]}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	report["env"] = env
	files := map[string]string{}
	for _, p := range reads {
		b, err := os.ReadFile(p)
		if err != nil {
			files[p] = "ERROR: " + err.Error()
			continue
		}
		files[p] = string(b)
	}
	report["files"] = files
	for _, w := range writes {
		p, content, _ := strings.Cut(w, "=")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fail(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			fail(err)
		}
	}
	if *fill != "" {
		p, n, _ := strings.Cut(*fill, "=")
		var size int
		if _, err := fmt.Sscan(n, &size); err != nil {
			fail(err)
		}
		f, err := os.Create(p)
		if err != nil {
			fail(err)
		}
		defer f.Close() // held open while the helper sleeps
		if *unlinked {
			if err := os.Remove(p); err != nil {
				fail(err)
			}
		}
		if _, err := f.Write(make([]byte, size)); err != nil {
			fail(err)
		}
		if err := f.Sync(); err != nil {
			fail(err)
		}
	}
	if *listen != "" {
		l, err := net.Listen("tcp", *listen)
		if err != nil {
			fail(err)
		}
		report["listened"] = l.Addr().String()
		defer l.Close()
	}
	b, _ := json.Marshal(report)
	if *term != "" {
		if err := os.WriteFile(*term, b, 0o644); err != nil {
			fail(err)
		}
	}
	fmt.Println(string(b))

	select {
	case <-time.After(*sleep):
	case <-sigs:
		fmt.Println("got SIGTERM")
		os.Exit(143)
	}
	os.Exit(*exit)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
