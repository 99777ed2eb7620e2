#!/usr/bin/env bash
# Builds kubectl-vacuum for each krew platform into bin/krew/ (one .tar.gz per platform
# holding the binary) and writes bin/krew/vacuum.yaml from dist/krew/vacuum.yaml.tmpl with each archive's sha256.
# Usage: hack/krew-manifest.sh VERSION (e.g. v0.1.0); KREW_PLATFORMS="linux/amd64 ..." narrows
# the platforms (each other platform is a cold cross-compile of the whole dependency tree).
set -euo pipefail
version=${1:?usage: hack/krew-manifest.sh VERSION}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/bin/krew
mkdir -p "$out"
platforms=""
for p in ${KREW_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64}; do
	os=${p%/*} arch=${p#*/}
	bin=kubectl-vacuum
	[ "$os" = windows ] && bin=kubectl-vacuum.exe
	dir=$(mktemp -d)
	(cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w" -o "$dir/$bin" ./cmd/kubectl-vacuum)
	archive=kubectl-vacuum_${os}_${arch}.tar.gz
	tar -C "$dir" -czf "$out/$archive" "$bin"
	rm -rf "$dir"
	sum=$(sha256sum "$out/$archive" | cut -d' ' -f1)
	platforms+="  - selector:
      matchLabels: {os: $os, arch: $arch}
    uri: https://github.com/vacuumops/vacuum-operator/releases/download/$version/$archive
    sha256: $sum
    bin: $bin
"
done
tmpl=$(cat "$root/dist/krew/vacuum.yaml.tmpl")
tmpl=${tmpl//@VERSION@/$version}
printf '%s\n' "${tmpl//@PLATFORMS@/${platforms%$'\n'}}" > "$out/vacuum.yaml"
echo "$out/vacuum.yaml"
