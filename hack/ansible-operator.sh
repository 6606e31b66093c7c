#!/usr/bin/env bash
# Build the real Ansible Operator (`ansible-operator`, the Go module
# github.com/operator-framework/ansible-operator-plugins) from the Go module proxy,
# once per machine: tests/operator/test_real_ansible_operator.py runs the collection's
# roles under it. The binary is cached outside git.
# Prints the path of the binary.
set -euo pipefail

# v1.42.2 is the newest release the module proxy serves; its operator code is v1.42.3's.
ANSIBLE_OPERATOR_VERSION="${ANSIBLE_OPERATOR_VERSION:-v1.42.2}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/metal3-baremetal/ansible-operator-${ANSIBLE_OPERATOR_VERSION}"
BINARY="$CACHE/ansible-operator"

if [[ -x "$BINARY" ]]; then
  echo "$BINARY"
  exit 0
fi

log() { echo "ansible-operator: $*" >&2; }

mkdir -p "$CACHE"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export GOFLAGS="-buildvcs=false -mod=mod"
export CGO_ENABLED=0

# `go install module@version` asks the proxy for the module's version list, which it refuses for this
# module; a throwaway module that requires the exact version builds the same command.
cd "$work"
go mod init metal3.local/ansibleoperatorbuild >/dev/null 2>&1
go mod edit -require="github.com/operator-framework/ansible-operator-plugins@${ANSIBLE_OPERATOR_VERSION}"
cat > tools.go <<'GO'
//go:build tools

package tools

import _ "github.com/operator-framework/ansible-operator-plugins/cmd/ansible-operator"
GO
log "resolving ansible-operator ${ANSIBLE_OPERATOR_VERSION} dependencies"
go mod tidy >&2
log "building ansible-operator (a few minutes on 2 cores)"
go build -trimpath -ldflags="-s -w" -o "$BINARY.tmp.$$" \
  github.com/operator-framework/ansible-operator-plugins/cmd/ansible-operator >&2
mv "$BINARY.tmp.$$" "$BINARY"

echo "$BINARY"
