package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "crddoc:", err)
		os.Exit(1)
	}
}

// errStale is returned by --check when the output file is not what crddoc would write.
var errStale = errors.New("out of date; run 'make docs'")

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("crddoc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	crdDir := fs.String("crds", "config/crd/bases", "directory of CustomResourceDefinition YAML files")
	out := fs.String("out", "docs/api.md", "Markdown file to write")
	check := fs.Bool("check", false, "write nothing; exit 1 if --out differs from what would be written")
	collapse := fs.String("collapse", "", "comma-separated field paths whose sub-fields are not listed (embedded Kubernetes types)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	crds, err := readCRDs(*crdDir)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	o := options{collapse: map[string]bool{}}
	for _, p := range strings.Split(*collapse, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.collapse[p] = true
		}
	}
	if err := render(&buf, crds, *crdDir, o); err != nil {
		return err
	}
	if *check {
		old, err := os.ReadFile(*out)
		if err != nil {
			return fmt.Errorf("check %s: %w", *out, err)
		}
		if !bytes.Equal(old, buf.Bytes()) {
			return fmt.Errorf("%s: %w", *out, errStale)
		}
		_, _ = fmt.Fprintf(stdout, "%s is up to date\n", *out)
		return nil
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	_, _ = fmt.Fprintf(stdout, "wrote %s (%d CRDs)\n", *out, len(crds))
	return nil
}

// readCRDs reads every *.yaml file of dir as one CustomResourceDefinition, sorted by kind.
func readCRDs(dir string) ([]apiextv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml files in %s", dir)
	}
	crds := make([]apiextv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read CRD: %w", err)
		}
		// controller-gen starts each file with a "---" document marker; one CRD per file.
		b = bytes.TrimPrefix(bytes.TrimLeft(b, "\n"), []byte("---\n"))
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			return nil, fmt.Errorf("parse %s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: kind %q, want CustomResourceDefinition", f, crd.Kind)
		}
		crds = append(crds, crd)
	}
	sort.Slice(crds, func(i, j int) bool {
		return strings.Compare(crds[i].Spec.Names.Kind, crds[j].Spec.Names.Kind) < 0
	})
	return crds, nil
}
