#!/bin/sh
# Usage: probe-accel.sh bios|uefi|uefi-secure-boot [OVMF_CODE OVMF_VARS]
# Prints kvm when this firmware runs under KVM here up to its network boot ROM (iPXE says "net0:"), else tcg.
# Nested hypervisors may crash with "KVM internal error ... emulation failure": OVMF at once, and SeaBIOS
# later, in iPXE's real-mode calls (SeaBIOS alone prints fine). The NIC has no backend: nothing is sent.
set -u
kind=$1 code=${2:-} vars=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ! -w /dev/kvm ]; then echo tcg; exit 0; fi
set -- -machine q35,accel=kvm,graphics=off -cpu host,-arch-capabilities -m 512 -nodefaults -display none \
  -no-user-config -serial "file:$work/serial" -monitor none -device virtio-net-pci,bootindex=1
if [ "$kind" != bios ]; then
  cp "$vars" "$work/vars.fd"
  set -- "$@" -machine smm=on -global driver=cfi.pflash01,property=secure,value=on \
    -drive "if=pflash,format=raw,unit=0,readonly=on,file=$code" -drive "if=pflash,format=raw,unit=1,file=$work/vars.fd"
fi
qemu-system-x86_64 "$@" >"$work/qemu.log" 2>&1 &
qemu=$!
result=tcg
for _ in $(seq 120); do
  sleep 0.5
  kill -0 "$qemu" 2>/dev/null || break
  grep -q "KVM internal error" "$work/qemu.log" && break
  if grep -aq "net0:" "$work/serial"; then
    sleep 2  # iPXE runs, and is still alive with no KVM error a moment later
    if kill -0 "$qemu" 2>/dev/null && ! grep -q "KVM internal error" "$work/qemu.log"; then result=kvm; fi
    break
  fi
done
kill "$qemu" 2>/dev/null
wait "$qemu" 2>/dev/null
echo "$result"
