#!/usr/bin/env bash
# Debian's cloud-init package, unpacked once per machine: the tests feed every network_data the collection
# renders through its OpenStack converter and netplan renderer (tests/harness/cloud_init.py). Only its Python
# package is used, from the venv's Python; nothing is installed on the system.
# Prints the directory that holds the `cloudinit` package.
set -euo pipefail

log() { echo "cloud-init: $*" >&2; }

candidate() { apt-cache policy cloud-init 2>/dev/null | sed -n 's/^ *Candidate: *//p'; }

if ! command -v apt-get >/dev/null; then
  log "apt-get is needed to download Debian's cloud-init package"
  exit 1
fi
ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/metal3-baremetal"
# The version Debian ships to this machine, unless CLOUD_INIT_VERSION pins one.
VERSION="${CLOUD_INIT_VERSION:-$(candidate)}"
if [[ -z "$VERSION" || "$VERSION" == "(none)" ]]; then
  cached="$(find "$ROOT" -mindepth 2 -maxdepth 2 -type d -path "$ROOT/cloud-init-*/dist-packages" 2>/dev/null |
    sort -V | tail -n 1 || true)"
  if [[ -z "${CLOUD_INIT_VERSION:-}" && -n "$cached" ]]; then  # apt's lists are gone; the last one unpacked
    echo "$cached"
    exit 0
  fi
  if [[ "$(id -u)" == 0 ]]; then
    log "no package list knows cloud-init yet: apt-get update"
    apt-get update -qq >&2
    VERSION="$(candidate)"
  fi
  if [[ -z "$VERSION" || "$VERSION" == "(none)" ]]; then
    log "apt knows no cloud-init package: run 'apt-get update' as root first"
    exit 1
  fi
fi
CACHE="$ROOT/cloud-init-${VERSION}"
PACKAGES="$CACHE/dist-packages"

if [[ -f "$PACKAGES/cloudinit/__init__.py" ]]; then
  echo "$PACKAGES"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log "downloading cloud-init ${VERSION}"
(cd "$work" && apt-get download -q "cloud-init=${VERSION}" >&2)
dpkg-deb -x "$work"/cloud-init_*.deb "$work/deb"
mkdir -p "$CACHE"
# Moved in whole under the cache, then renamed: a concurrent run sees the package complete or not at all.
unpacked="$(mktemp -d "$CACHE/.unpack.XXXXXX")"
trap 'rm -rf "$work" "$unpacked"' EXIT
mv "$work/deb/usr/lib/python3/dist-packages" "$unpacked/dist-packages"
mv -T "$unpacked/dist-packages" "$PACKAGES" 2>/dev/null || [[ -f "$PACKAGES/cloudinit/__init__.py" ]]
echo "$PACKAGES"
