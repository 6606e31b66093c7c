#!/usr/bin/env bash
# Build Cluster API's controllers (the Go module sigs.k8s.io/cluster-api) from the Go module proxy, once per
# machine: the core manager, the kubeadm bootstrap provider and the kubeadm control plane, with the CRDs and
# webhook manifests of the same release beside them. Cached outside git, next to the kube binaries:
#   bin/cluster-api-manager, bin/kubeadm-bootstrap-manager, bin/kubeadm-control-plane-manager
#   crds/core/*.yaml, crds/bootstrap/*.yaml, crds/controlplane/*.yaml   (config/crd/bases of each provider)
#   webhooks/core.yaml, webhooks/bootstrap.yaml, webhooks/controlplane.yaml   (config/webhook/manifests.yaml)
# Prints the cache directory on stdout; logs go to stderr. The cache is built in a temporary directory and
# renamed into place at the end, so a failed build leaves none; a second run prints it and does nothing.
# GOFLAGS from the environment is kept (GOFLAGS=-p=1 compiles one package at a time on a busy machine).
set -euo pipefail

CLUSTER_API_VERSION="${CLUSTER_API_VERSION:-v1.14.2}"
BUILD_REVISION=1  # bump when the way of building changes, so cached binaries are rebuilt
PARENT="${XDG_CACHE_HOME:-$HOME/.cache}/metal3-baremetal"
CACHE="$PARENT/cluster-api-${CLUSTER_API_VERSION}-r${BUILD_REVISION}"
MODULE=sigs.k8s.io/cluster-api
# provider name in the cache, binary name (upstream's Makefile names), package directory in the module
PROVIDERS=(
  "core cluster-api-manager core"
  "bootstrap kubeadm-bootstrap-manager bootstrap/kubeadm"
  "controlplane kubeadm-control-plane-manager controlplane/kubeadm"
)

complete() {
  [[ -x "$CACHE/bin/cluster-api-manager" && -x "$CACHE/bin/kubeadm-bootstrap-manager" &&
     -x "$CACHE/bin/kubeadm-control-plane-manager" ]]
}

if complete; then
  echo "$CACHE"
  exit 0
fi

log() { echo "cluster-api: $*" >&2; }

# Test workers may call this at the same time on a cold machine: one builds, the others wait for it.
mkdir -p "$PARENT"
exec 9>"$PARENT/.cluster-api.lock"
flock 9
if complete; then
  echo "$CACHE"
  exit 0
fi

work="$(mktemp -d)"
staging="$(mktemp -d "$PARENT/.cluster-api-${CLUSTER_API_VERSION}.XXXXXX")"
trap 'rm -rf "$work" "$staging"' EXIT
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-buildvcs=false -mod=mod"
export CGO_ENABLED=0
started=$SECONDS

# The module's go.mod replaces sigs.k8s.io/cluster-api/api with ./api (a module of its own, published at the
# same version), and replace directives of a dependency are ignored: a throwaway module requires both.
cd "$work"
go mod init metal3.local/clusterapibuild >/dev/null 2>&1
go mod edit -require="${MODULE}@${CLUSTER_API_VERSION}" -require="${MODULE}/api@${CLUSTER_API_VERSION}"
{
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for provider in "${PROVIDERS[@]}"; do
    read -r _name _binary package <<<"$provider"
    printf '\t_ "%s/%s"\n' "$MODULE" "$package"
  done
  printf ')\n'
} > tools.go
log "resolving ${MODULE} ${CLUSTER_API_VERSION} dependencies"
go mod tidy >&2

packages=()
for provider in "${PROVIDERS[@]}"; do
  read -r _name _binary package <<<"$provider"
  packages+=("${MODULE}/${package}")
done
api_version="$(go list -deps -f '{{with .Module}}{{if eq .Path "'"${MODULE}/api"'"}}{{.Version}}{{end}}{{end}}' \
  "${packages[@]}" | sort -u)"
if [[ "$api_version" != "$CLUSTER_API_VERSION" ]]; then
  log "the controllers would link ${MODULE}/api '${api_version}', not ${CLUSTER_API_VERSION}"
  exit 1
fi

# Stamp the version as upstream's release build does (hack/scripts/release/version.sh): the managers log it.
minor="${CLUSTER_API_VERSION#v1.}"; minor="${minor%%.*}"
version_flags="-X ${MODULE}/version.gitVersion=${CLUSTER_API_VERSION} -X ${MODULE}/version.gitMajor=1"
version_flags+=" -X ${MODULE}/version.gitMinor=${minor} -X ${MODULE}/version.gitTreeState=clean"
source_dir="$(go list -m -f '{{.Dir}}' "$MODULE")"

mkdir -p "$staging/bin" "$staging/webhooks"
for provider in "${PROVIDERS[@]}"; do
  read -r name binary package <<<"$provider"
  log "building ${binary} (${package}; minutes on 2 cores)"
  go build -trimpath -ldflags="-s -w ${version_flags}" -o "$staging/bin/$binary" "${MODULE}/${package}" >&2
  mkdir -p "$staging/crds/$name"
  cp "$source_dir/$package"/config/crd/bases/*.yaml "$staging/crds/$name/"
  cp "$source_dir/$package/config/webhook/manifests.yaml" "$staging/webhooks/$name.yaml"
done
chmod 0555 "$staging"/bin/*
chmod 0444 "$staging"/crds/*/*.yaml "$staging"/webhooks/*.yaml
chmod 0755 "$staging"

rm -rf "$CACHE"  # an incomplete cache of an older way of building, if any
mv -T "$staging" "$CACHE"
log "built in $((SECONDS - started)) s: $CACHE"
echo "$CACHE"
