package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one local file copied into the image.
type File struct {
	Src string // path on this machine
	Dst string // absolute path in the image
}

// Spec describes the image to build.
type Spec struct {
	Tag        string // e.g. vacuum-operator:dev
	Files      []File
	User       string // UID:GID
	Entrypoint []string
	Cmd        []string
	Arch       string
	Created    time.Time // every mtime and the config's created time
}

// Fixed content of the base layer, as in distroless/static:nonroot.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
)

// WriteImageTarball builds the image of spec and writes it to out as a docker-archive tarball
// tagged spec.Tag. It returns the image's digest.
func WriteImageTarball(out string, spec Spec) (v1.Hash, error) {
	tag, err := name.NewTag(spec.Tag)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image tag %q: %w", spec.Tag, err)
	}
	img, err := BuildImage(spec)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("digest of %s: %w", spec.Tag, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*")
	if err != nil {
		return v1.Hash{}, fmt.Errorf("create image tarball: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tarball.Write(tag, img, tmp); err != nil {
		tmp.Close()
		return v1.Hash{}, fmt.Errorf("write image tarball %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return v1.Hash{}, fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return v1.Hash{}, fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return v1.Hash{}, fmt.Errorf("rename image tarball into place: %w", err)
	}
	return digest, nil
}

// BuildImage returns the one-layer image of spec.
func BuildImage(spec Spec) (v1.Image, error) {
	layerTar, err := buildLayerTar(spec)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: spec.Created},
			CreatedBy: "imagetar " + strings.Join(dsts(spec.Files), " "),
			Comment:   "built by hack/imagetar (go-containerregistry)",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture = spec.Arch
	cfg.OS = "linux"
	cfg.Created = v1.Time{Time: spec.Created}
	cfg.Config.User = spec.User
	cfg.Config.Entrypoint = spec.Entrypoint
	cfg.Config.Cmd = spec.Cmd
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

func dsts(files []File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Dst
	}
	return out
}

// entry is one tar entry of the layer before it is written.
type entry struct {
	hdr  tar.Header
	data []byte
}

// buildLayerTar returns the layer as an uncompressed tar: the base files, then spec.Files, with
// every parent directory present and entries sorted by path.
func buildLayerTar(spec Spec) ([]byte, error) {
	entries := map[string]*entry{}
	dir := func(p string, mode int64, uid, gid int) {
		entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: uid, Gid: gid}}
	}
	file := func(p string, mode int64, data []byte) {
		entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data))}, data: data}
	}
	dir("etc", 0o755, 0, 0)
	dir("home", 0o755, 0, 0)
	dir("home/nonroot", 0o700, 65532, 65532)
	dir("tmp", 0o1777, 0, 0)
	file("etc/passwd", 0o644, []byte(passwd))
	file("etc/group", 0o644, []byte(group))
	for _, f := range spec.Files {
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, fmt.Errorf("read %s for %s: %w", f.Src, f.Dst, err)
		}
		p := strings.TrimPrefix(path.Clean(f.Dst), "/")
		if old, ok := entries[p]; ok && old.hdr.Typeflag == tar.TypeDir {
			return nil, fmt.Errorf("%s: the image already has a directory there", f.Dst)
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				dir(d, 0o755, 0, 0)
			}
		}
		file(p, 0o755, data)
	}
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names) // parents sort before their children
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		e := entries[p]
		e.hdr.ModTime = spec.Created
		e.hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, fmt.Errorf("tar header for %s: %w", p, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar data of %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer tar: %w", err)
	}
	return buf.Bytes(), nil
}
