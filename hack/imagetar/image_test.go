package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func writeExec(t *testing.T, dir, base, content string) string {
	t.Helper()
	p := filepath.Join(dir, base)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func testSpec(t *testing.T) Spec {
	dir := t.TempDir()
	return Spec{
		Tag: "vacuum-operator:test",
		Files: []File{
			{Src: writeExec(t, dir, "manager", "manager-binary"), Dst: "/manager"},
			{Src: writeExec(t, dir, "runner", "runner-binary"), Dst: "/usr/local/bin/vacuum-runner"},
		},
		User:       "65532:65532",
		Entrypoint: []string{"/manager"},
		Arch:       "amd64",
		Created:    time.Unix(1700000000, 0).UTC(),
	}
}

// readLayer returns the headers and contents of every entry of the image's only layer.
func readLayer(t *testing.T, path, tag string) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &ref)
	if err != nil {
		t.Fatalf("the tarball does not load as %s: %v", tag, err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("want 1 layer, got %d (%v)", len(layers), err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	hdrs, data := map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hdrs[h.Name], data[h.Name] = h, string(b)
	}
	return hdrs, data
}

func TestImageTarballLoadsUnderItsTagWithNonRootUserAndNoShell(t *testing.T) {
	spec := testSpec(t)
	out := filepath.Join(t.TempDir(), "image.tar")
	if _, err := WriteImageTarball(out, spec); err != nil {
		t.Fatal(err)
	}
	ref, _ := name.NewTag(spec.Tag)
	img, err := tarball.ImageFromPath(out, &ref)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/manager" {
		t.Errorf("config user %q entrypoint %q, want 65532:65532 and [/manager]", cfg.Config.User, cfg.Config.Entrypoint)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}

	hdrs, data := readLayer(t, out, spec.Tag)
	for name, want := range map[string]string{"manager": "manager-binary", "usr/local/bin/vacuum-runner": "runner-binary"} {
		h, ok := hdrs[name]
		if !ok {
			t.Fatalf("%s missing from the layer", name)
		}
		if data[name] != want || h.Mode != 0o755 || h.Uid != 0 || !h.ModTime.Equal(spec.Created) {
			t.Errorf("%s: content %q mode %o uid %d mtime %v", name, data[name], h.Mode, h.Uid, h.ModTime)
		}
	}
	// mutate.Extract reports directories without their trailing slash.
	for _, dir := range []string{"usr", "usr/local", "usr/local/bin", "tmp", "home/nonroot"} {
		if _, ok := hdrs[dir]; !ok {
			t.Errorf("directory %s missing", dir)
		}
	}
	if hdrs["tmp"].Mode&0o7777 != 0o1777 || hdrs["home/nonroot"].Uid != 65532 {
		t.Errorf("tmp mode %o, home/nonroot uid %d", hdrs["tmp"].Mode, hdrs["home/nonroot"].Uid)
	}
	if want := "nonroot:x:65532:65532:"; !strings.Contains(data["etc/passwd"], want) {
		t.Errorf("/etc/passwd has no %q line:\n%s", want, data["etc/passwd"])
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox"} {
		if _, ok := hdrs[shell]; ok {
			t.Errorf("the image has a shell: %s", shell)
		}
	}
}

func TestBadInputIsRefusedWithoutWritingATarball(t *testing.T) {
	dir := t.TempDir()
	good := testSpec(t)
	cases := map[string]func(*Spec){
		"missing source file":   func(s *Spec) { s.Files[0].Src = filepath.Join(dir, "nope") },
		"invalid tag":           func(s *Spec) { s.Tag = "Not A Tag" },
		"file over a directory": func(s *Spec) { s.Files[0].Dst = "/tmp" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			spec := good
			spec.Files = append([]File(nil), good.Files...)
			mutate(&spec)
			out := filepath.Join(dir, "out.tar")
			if _, err := WriteImageTarball(out, spec); err == nil {
				t.Fatal("want an error")
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a tarball was left behind: %v", err)
			}
		})
	}
}

func TestFlagsRequireTagOutputEntrypointAndFiles(t *testing.T) {
	cases := map[string][]string{
		"no flags":       {},
		"no entrypoint":  {"--tag", "x:y", "--out", "o.tar", "--add", "a=/a"},
		"relative dst":   {"--tag", "x:y", "--out", "o.tar", "--entrypoint", "/a", "--add", "a=a"},
		"stray argument": {"--tag", "x:y", "--out", "o.tar", "--entrypoint", "/a", "--add", "a=/a", "extra"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			if err := run(args, io.Discard); err == nil {
				t.Errorf("run(%q) succeeded", args)
			}
		})
	}
}
