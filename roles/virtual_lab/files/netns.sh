#!/bin/sh
# Usage: netns.sh up NETNS BRIDGE MAC ADDRESS/PREFIX [VLAN_ID=ADDRESS/PREFIX ...]
# The lab's network namespace, its bridge (VLAN filtering off, the default: tagged frames pass) and the
# lab host's addresses, untagged and on VLAN sub-interfaces. Nothing is linked to the host's namespace.
# Prints "changed" when it changed anything.
set -eu
action=$1 ns=$2
changed=
ipn() { ip -n "$ns" "$@"; }
up() {  # up DEVICE: the link up
  ipn link show "$1" | grep -q '[<,]UP[,>]' || { ipn link set "$1" up; changed=1; }
}
address() {  # address DEVICE ADDRESS/PREFIX
  ipn -o addr show dev "$1" | grep -q " inet $2 " || { ipn addr add "$2" dev "$1"; changed=1; }
}
case $action in
up)
  bridge=$3 mac=$4 host=$5
  shift 5
  [ -e "/run/netns/$ns" ] || { ip netns add "$ns"; changed=1; }
  up lo
  ipn link show "$bridge" >/dev/null 2>&1 || {
    ipn link add "$bridge" address "$mac" type bridge; changed=1; }
  up "$bridge"
  address "$bridge" "$host"
  for vlan in "$@"; do
    id=${vlan%%=*} dev="$bridge.${vlan%%=*}"
    # A kernel without 802.1Q (CONFIG_VLAN_8021Q) cannot: vlan-tap.py then makes it a TAP device, in user space.
    if ipn -d link show "$dev" 2>/dev/null | grep -q 'tun type tap'; then
      echo "no-vlan-support $id"
      continue
    fi
    if ! ipn link show "$dev" >/dev/null 2>&1; then
      if ! ipn link add link "$bridge" name "$dev" type vlan id "$id" 2>/dev/null; then
        echo "no-vlan-support $id"
        continue
      fi
      changed=1
    fi
    up "$dev"
    address "$dev" "${vlan#*=}"
  done
  ;;
esac
[ -z "$changed" ] || echo changed
