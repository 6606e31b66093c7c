#!/usr/bin/env bash
# Debian's nftables package: the tests check every firewall rule set the collection renders with the real
# `nft --check`, and apply one in a throwaway network namespace (tests/harness/nft.py).
# Does nothing when nft is there (on PATH or in /usr/sbin); otherwise installs the package with apt, as root.
set -euo pipefail

log() { echo "nftables: $*" >&2; }

if command -v nft >/dev/null || [[ -x /usr/sbin/nft ]]; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  log "nft is missing and apt-get is not there to install Debian's nftables package"
  exit 1
fi
if [[ "$(id -u)" != 0 ]]; then
  log "nft is missing: install Debian's nftables package as root (apt-get install nftables)"
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
log "installing Debian's nftables package"
if ! apt-get install -y -qq --no-install-recommends nftables >&2; then
  log "apt knows no nftables package yet: apt-get update"
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends nftables >&2
fi
command -v nft >/dev/null || [[ -x /usr/sbin/nft ]]
