// Command imagetar builds a minimal container image from local files and writes it as an image
// tarball that `docker load`, `ctr images import` and `kind load image-archive` all accept. It is
// how `make image-tar` packages the operator image (and the real-cluster lane its pause image)
// without a Docker engine, using github.com/google/go-containerregistry.
//
//	go run ./hack/imagetar --tag vacuum-operator:dev --out bin/vacuum-operator.tar \
//	    --add bin/manager=/manager --add bin/vacuum-runner=/vacuum-runner \
//	    --user 65532:65532 --entrypoint /manager
//
// The image has one layer and no shell, like gcr.io/distroless/static:nonroot:
//
//	/etc/passwd   root (0), nobody (65534) and nonroot (65532), home /home/nonroot
//	/etc/group    root, nobody, nonroot
//	/home/nonroot 0700, owned by 65532:65532
//	/tmp          1777
//	/<dst>        each --add SRC=DST file, mode 0755, owned by root
//
// Invariants: the output is a function of the inputs only (every mtime and the config's
// created time come from SOURCE_DATE_EPOCH, default 0; entries are written in a fixed order), so
// two builds of the same binaries give the same image digest. The tarball is a docker-archive
// (manifest.json with RepoTags): docker and containerd both name the image after --tag,
// containerd normalising `vacuum-operator:dev` to `docker.io/library/vacuum-operator:dev`, which
// is also how the kubelet resolves that image name. The file is written to a temporary name
// and renamed, so a reader never sees a partial tarball.
package main
