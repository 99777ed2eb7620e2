package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// fileList is a repeatable --add SRC=DST flag.
type fileList []File

func (l *fileList) String() string {
	parts := make([]string, len(*l))
	for i, f := range *l {
		parts[i] = f.Src + "=" + f.Dst
	}
	return strings.Join(parts, ",")
}

func (l *fileList) Set(v string) error {
	src, dst, ok := strings.Cut(v, "=")
	if !ok || src == "" || !strings.HasPrefix(dst, "/") || dst == "/" {
		return fmt.Errorf("want SRC=/ABSOLUTE/DST, got %q", v)
	}
	*l = append(*l, File{Src: src, Dst: dst})
	return nil
}

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "imagetar:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("imagetar", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var spec Spec
	var files fileList
	var entrypoint, cmd string
	fs.Var(&files, "add", "SRC=DST: copy local file SRC to absolute path DST in the image, mode 0755 (repeatable)")
	fs.StringVar(&spec.Tag, "tag", "", "image name and tag, e.g. vacuum-operator:dev (required)")
	fs.StringVar(&spec.User, "user", "65532:65532", "USER of the image config (UID:GID)")
	fs.StringVar(&entrypoint, "entrypoint", "", "ENTRYPOINT, space-separated (required)")
	fs.StringVar(&cmd, "cmd", "", "CMD, space-separated")
	fs.StringVar(&spec.Arch, "arch", runtime.GOARCH, "architecture recorded in the image config")
	out := fs.String("out", "", "output tarball (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if spec.Tag == "" || *out == "" || entrypoint == "" || len(files) == 0 {
		return errors.New("--tag, --out, --entrypoint and at least one --add are required")
	}
	spec.Files = files
	spec.Entrypoint = strings.Fields(entrypoint)
	spec.Cmd = strings.Fields(cmd)
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	spec.Created = created
	digest, err := WriteImageTarball(*out, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "imagetar: wrote %s (%s, image %s)\n", *out, spec.Tag, digest)
	return nil
}

// sourceDateEpoch is the reproducible-builds timestamp (https://reproducible-builds.org/specs/
// source-date-epoch/), the Unix epoch when unset.
func sourceDateEpoch() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	secs, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
	}
	return time.Unix(secs, 0).UTC(), nil
}
