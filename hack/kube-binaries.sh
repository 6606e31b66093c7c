#!/usr/bin/env bash
# Build kube-apiserver, kube-controller-manager (for its garbage collector and
# namespace controllers) and etcd from the Go module proxy, once per machine.
# Neither is packaged in Debian or PyPI; the binaries are cached outside git.
# Prints the directory that holds them.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.34.4}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.5}"  # the 3.6 line kube-apiserver v1.34 is tested with
BUILD_REVISION=2  # bump when the way of building changes, so cached binaries are rebuilt
CACHE="${METAL3_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/metal3-baremetal/kube-${KUBE_VERSION}-etcd-${ETCD_VERSION}-r${BUILD_REVISION}}"

if [[ -x "$CACHE/kube-apiserver" && -x "$CACHE/kube-controller-manager" && -x "$CACHE/etcd" ]]; then
  echo "$CACHE"
  exit 0
fi

mkdir -p "$CACHE"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GOFLAGS="-buildvcs=false -mod=mod"
export CGO_ENABLED=0

log() { echo "kube-binaries: $*" >&2; }

# kube-apiserver: k8s.io/kubernetes replaces each staging module with a local
# path; point each at its published v0.x.y release instead.
staging_version="v0.${KUBE_VERSION#v1.}"
mkdir -p "$work/kube" && cd "$work/kube"
go mod init metal3.local/kubebuild >/dev/null 2>&1
gomod="$(go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
go mod edit -require="k8s.io/kubernetes@${KUBE_VERSION}"
sed -n '/^replace (/,/^)/p' "$gomod" | awk '$2 == "=>" && $3 ~ /^\.\/staging/ {print $1}' |
  while read -r mod; do go mod edit -replace="${mod}=${mod}@${staging_version}"; done
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
log "resolving kube-apiserver ${KUBE_VERSION} dependencies"
go mod tidy >&2
# Stamp the version as Kubernetes' own build does, so /version reports it.
minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
version_flags="-X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1"
version_flags+=" -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean"
for cmd in kube-apiserver kube-controller-manager; do
  log "building ${cmd} (minutes on 2 cores)"
  go build -trimpath -ldflags="-s -w ${version_flags}" -o "$CACHE/${cmd}.tmp.$$" "k8s.io/kubernetes/cmd/${cmd}" >&2
  mv "$CACHE/${cmd}.tmp.$$" "$CACHE/${cmd}"
done

# etcd: its server module carries replace directives, so it needs a wrapper too.
mkdir -p "$work/etcd" && cd "$work/etcd"
go mod init metal3.local/etcdbuild >/dev/null 2>&1
go mod edit -require="go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
log "resolving etcd ${ETCD_VERSION} dependencies"
go mod tidy >&2
log "building etcd"
go build -trimpath -ldflags="-s -w" -o "$CACHE/etcd.tmp.$$" go.etcd.io/etcd/server/v3 >&2
mv "$CACHE/etcd.tmp.$$" "$CACHE/etcd"

echo "$CACHE"
