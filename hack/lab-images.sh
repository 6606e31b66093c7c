#!/usr/bin/env bash
# The lab's images, built once per machine from Debian packages and PyPI (no diskimage-builder sources are
# reachable): an ironic-python-agent ramdisk (ipa.kernel + ipa.initramfs) and its bootable ISO (ipa.iso, BIOS and
# UEFI Secure Boot), and a whole-disk Debian cloud image (debian.qcow2, BIOS and UEFI, cloud-init reading a
# config drive, nftables), with SHA256SUMS; and esp.img, the EFI system partition Ironic puts on the UEFI ISOs it
# builds for virtual media. Needs root (debootstrap, loop devices, mounts).
# Prints the directory that holds them.
set -euo pipefail

BUILD_REVISION=r10  # bump when the recipe changes, so cached images are rebuilt
# r10 changed only the cloud image (mdadm, so that it boots from a software RAID): where r9's images are cached,
# the agent's ramdisk, its ISO and the ESP are kept, and the cloud image is made anew.
PREVIOUS_REVISION=r9
IPA_VERSION=13.0.0  # the agent released with Ironic 39 (the ironic role's)
GLEAN_VERSION=1.25.1  # applies network_data.json from a config-2 ISO: the DHCP-less virtual media path
SUITE=bookworm
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/metal3-baremetal"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${LAB_IMAGES_DIR:-$ROOT/lab-images-${BUILD_REVISION}}"
# Downloaded .debs, shared by both debootstraps and the apt-get runs in their chroots, kept across revisions.
PACKAGES="$ROOT/debian-packages-${SUITE}"
FILES=(ipa.kernel ipa.initramfs ipa.iso debian.qcow2 SHA256SUMS)

log() { echo "lab-images: $*" >&2; }
export MTOOLS_SKIP_CHECK=1  # mtools on a loop partition, which has no geometry

complete() {
  local f
  for f in "${FILES[@]}"; do [[ -s "$CACHE/$f" ]] || return 1; done
}

if complete && [[ -s "$CACHE/esp.img" ]]; then
  echo "$CACHE"
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  log "building the images needs root (debootstrap, loop devices, mounts): run this as root once"
  exit 1
fi

# Host tools, from Debian.
HOST_PACKAGES=(debootstrap xorriso isolinux syslinux-common dosfstools mtools cpio gdisk qemu-utils zstd
  e2fsprogs util-linux zerofree)
missing=()
for p in "${HOST_PACKAGES[@]}"; do
  dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2; }
fi

mkdir -p "$ROOT" "$PACKAGES/partial"
work="$(mktemp -d "$ROOT/.lab-images-${BUILD_REVISION}.XXXXXX")"
loop=""
cleanup() {
  local m
  # Deepest mounts first.
  for m in $(findmnt -rn -o TARGET | grep -F "$work/" | sort -r); do umount -l "$m" 2>/dev/null || true; done
  [[ -n "$loop" ]] && losetup -d "$loop" 2>/dev/null || true
  rm -rf --one-file-system "$work"  # never into a mount left behind (the package cache, /proc)
}
trap cleanup EXIT
trap "exit 143" TERM INT  # through the EXIT trap: a killed build leaves no mounts, loop device or temp dir

# A chroot that can run apt-get and pip: kernel filesystems, DNS, the shared package cache, no daemons started.
# Its /dev is a tmpfs of its own, so nothing is created on the host's /dev.
chroot_up() {
  local dir="$1" dev
  mount -t proc proc "$dir/proc"
  mount -t sysfs sysfs "$dir/sys"
  mount -t tmpfs -o mode=0755 dev "$dir/dev"
  for dev in null zero full random urandom tty; do cp -a "/dev/$dev" "$dir/dev/"; done
  mkdir -p "$dir/dev/pts" "$dir/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666 devpts "$dir/dev/pts"
  ln -sf pts/ptmx "$dir/dev/ptmx"
  mount --bind "$PACKAGES" "$dir/var/cache/apt/archives"
  cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
  # The host's CA bundle for pip (it may hold a proxy's CA the chroot's does not); removed afterwards.
  cp -L "${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}" "$dir/etc/host-ca.crt" 2>/dev/null || true
  printf '#!/bin/sh\nexit 101\n' > "$dir/usr/sbin/policy-rc.d"
  chmod 0755 "$dir/usr/sbin/policy-rc.d"
}

chroot_down() {
  local dir="$1" m
  for m in var/cache/apt/archives dev/pts dev sys proc; do umount "$dir/$m"; done
  rm -f "$dir/usr/sbin/policy-rc.d" "$dir/etc/host-ca.crt"
  # The host's resolver out; systemd-resolved's link stays.
  [[ -L "$dir/etc/resolv.conf" ]] || : > "$dir/etc/resolv.conf"
}

# A clean environment (the host's pip settings name host paths), keeping proxies and package indexes.
in_chroot() {
  local dir="$1" var pass=(); shift
  for var in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do
    [[ -n "${!var:-}" ]] && pass+=("$var=${!var}")
  done
  [[ -s "$dir/etc/host-ca.crt" ]] && pass+=(PIP_CERT=/etc/host-ca.crt)
  # HOME in the chroot's /tmp, which slim() empties: nothing of a build is left in a home directory.
  env -i HOME=/tmp LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${pass[@]}" chroot "$dir" "$@" >&2
}

bootstrap() {
  local dir="$1" include="$2"
  mkdir -p "$dir"
  debootstrap --variant=minbase --cache-dir="$PACKAGES" --include="$include" "$SUITE" "$dir" "$DEBIAN_MIRROR" >&2
  # debootstrap only knows the main suite; updates and security fixes come from apt.
  cat > "$dir/etc/apt/sources.list" <<EOF
deb $DEBIAN_MIRROR $SUITE main
deb $DEBIAN_MIRROR $SUITE-updates main
EOF
}

# Documentation, locales, caches and bytecode: nothing a lab machine reads. With ``compile``, Python's bytecode is
# made afresh by the image's own interpreter: the OS image's cloud-init then does not compile its modules under
# emulation as the machine first boots. Not in the agent's ramdisk: with it (2 MB more, zstd -12) Debian's UEFI
# GRUB ran out of memory loading the initramfs from the virtual-media ISO (2 GiB guest), though the agent came up
# 38 s sooner on a BIOS boot (63.6 s from power on instead of 101.4 s, idle machine, one vCPU). A file that does
# not compile (test data in some packages) is left as it is.
slim() {
  local dir="$1" compile="${2:-}"
  rm -rf "$dir"/usr/share/{doc,man,info,lintian,linda,locale}/* "$dir"/var/cache/apt/*.bin \
    "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/archives/*.deb "$dir"/var/log/*.log "$dir"/var/log/apt/* \
    "$dir"/tmp/*
  find "$dir" -xdev -name __pycache__ -type d -prune -exec rm -rf {} +
  if [[ "$compile" == compile ]]; then
    # shellcheck disable=SC2016  # the chroot's shell expands $d
    in_chroot "$dir" sh -c 'for d in /usr/lib/python3 /usr/lib/python3.*; do
      [ -d "$d" ] && python3 -m compileall -q -j 0 "$d" >/dev/null; done; :'
  fi
  : > "$dir/etc/machine-id"
  rm -f "$dir/var/lib/dbus/machine-id"
}

# --- ironic-python-agent ramdisk -------------------------------------------------------------------------------
build_ipa() {
  local dir="$work/ipa" kver
  log "debootstrap of the agent's root filesystem"
  bootstrap "$dir" "systemd-sysv,udev,python3,python3-venv,iproute2,ifupdown,isc-dhcp-client,ifenslave,vlan,\
lshw,dmidecode,pciutils,util-linux,parted,gdisk,dosfstools,e2fsprogs,xfsprogs,qemu-utils,efibootmgr,mdadm,\
lvm2,kmod,ipmitool,hdparm,nvme-cli,smartmontools,sg3-utils,psmisc,ethtool,linux-image-amd64,ca-certificates,curl,\
procps"
  chroot_up "$dir"
  log "installing ironic-python-agent ${IPA_VERSION} and glean ${GLEAN_VERSION} from PyPI"
  in_chroot "$dir" python3 -m venv /opt/ironic-python-agent
  in_chroot "$dir" /opt/ironic-python-agent/bin/pip install -q --no-cache-dir --disable-pip-version-check \
    "ironic-python-agent==${IPA_VERSION}" "glean==${GLEAN_VERSION}"
  ln -sf /opt/ironic-python-agent/bin/ironic-python-agent "$dir/usr/local/bin/ironic-python-agent"
  # glean: mounts a config-2 volume (the virtual media ISO Ironic builds with network_data.json) and writes
  # each NIC's ifupdown config from it, DHCP for NICs it does not describe, then brings the NIC up.
  in_chroot "$dir" /opt/ironic-python-agent/bin/glean-install
  chroot_down "$dir"
  # Only a config-2 volume on a CD, the virtual media ISO, is the agent's: a deployed disk's config drive (also
  # config-2) holds the instance's network, which glean would apply in place of DHCP when the agent boots again
  # to clean that disk (seen in the lab: glean failed on it, and the agent had no network). Without one, glean
  # gives every NIC DHCP. Booted from virtual media (boot_method=vmedia), it waits for the CD: its controller's
  # module may load after this runs (seen in the lab: /dev/sr0 appeared 9 s later, and the agent had no network).
  cat > "$dir/opt/ironic-python-agent/bin/glean-early.sh" <<'EOF'
#!/bin/bash
# metal3.baremetal's glean-early: the config drive of the virtual media ISO only (see hack/lab-images.sh).
set -eu -o pipefail
PATH=/usr/local/bin:/bin:/sbin:/usr/bin:/usr/sbin
wait=0
if grep -qw boot_method=vmedia /proc/cmdline; then
  wait=180
fi
device=""
for _ in $(seq 0 "$wait"); do
  udevadm settle --timeout=5 || true
  labels="$(blkid -o export /dev/sr* 2>/dev/null || true)"
  device="$(blkid -o device -t LABEL=config-2 /dev/sr* 2>/dev/null | head -n 1 || true)"
  # The ISO without network_data (labelled VMEDIA_BOOT_ISO) says there is nothing to wait for.
  if [ -n "$device" ] || grep -q '^LABEL=VMEDIA_BOOT_ISO$' <<<"$labels" || [ "$wait" = 0 ]; then
    break
  fi
  sleep 1
done
if [ -z "$device" ]; then
  exit 0
fi
mkdir -p /mnt/config
mount -t iso9660 -o ro,mode=0700 "$device" /mnt/config || true
exec /opt/ironic-python-agent/bin/python3 -m glean --skip-network --ssh --hostname "$@"
EOF
  chmod 0755 "$dir/opt/ironic-python-agent/bin/glean-early.sh"
  # glean-install's unit runs the package's own script: this one runs in its place.
  mkdir -p "$dir/etc/systemd/system/glean-early.service.d"
  cat > "$dir/etc/systemd/system/glean-early.service.d/metal3-baremetal.conf" <<'EOF'
[Service]
ExecStart=
ExecStart=/opt/ironic-python-agent/bin/glean-early.sh --debug
EOF

  cat > "$dir/etc/systemd/system/ironic-python-agent.service" <<'EOF'
[Unit]
Description=Ironic Python Agent
After=network-online.target glean-early.service
Wants=network-online.target

[Service]
ExecStart=/usr/local/bin/ironic-python-agent
Restart=always
RestartSec=10s
# Its log on the serial console as well: the lab's tests read it there.
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
EOF
  ln -sf /etc/systemd/system/ironic-python-agent.service \
    "$dir/etc/systemd/system/multi-user.target.wants/ironic-python-agent.service"
  echo ironic-python-agent > "$dir/etc/hostname"
  : > "$dir/etc/fstab"
  # Units that make no sense in a ramdisk.
  for unit in systemd-remount-fs.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
    fstrim.timer e2scrub_reap.service lvm2-monitor.service mdmonitor.service smartmontools.service; do
    ln -sf /dev/null "$dir/etc/systemd/system/$unit"
  done
  ln -sf /lib/systemd/systemd "$dir/init"

  kver="$(basename "$(ls -d "$dir"/lib/modules/*)")"
  cp "$dir/boot/vmlinuz-$kver" "$work/out/ipa.kernel"
  local compress=(gzip -9)
  grep -q '^CONFIG_RD_ZSTD=y' "$dir/boot/config-$kver" && compress=(zstd -q -T0 -12)
  rm -rf "${dir:?}"/boot/* "$dir/var/cache/apt/archives"/*.deb
  find "$dir/opt/ironic-python-agent/lib" -type d -name tests -prune -exec rm -rf {} +
  rm -rf "$dir"/opt/ironic-python-agent/lib/python3*/site-packages/{pip,setuptools,_distutils_hack}* \
    "$dir"/opt/ironic-python-agent/lib/python3*/site-packages/distutils-precedence.pth
  slim "$dir"
  prune_ramdisk "$dir"
  pack_ramdisk "$dir" "$work/out/ipa.initramfs" "${compress[@]}"
}

# The kernel modules a lab machine's agent loads - its virtio and SATA devices, the virtual media CD and the
# config drive, the filesystems and RAID it writes, bonds and VLANs - and a few common NICs and disk controllers,
# with what they need (hack/ramdisk_modules.py); 240 of 1,970 modules, 34 MB of the 175 MB they were. Then
# Python's bytecode, made by the ramdisk's own interpreter: the agent starts without compiling its modules under
# emulation (38 s sooner on an idle BIOS boot). With all the modules, the bytecode made the ramdisk too large
# for Debian's UEFI GRUB loading it from the virtual-media ISO in a 2 GiB guest (123 MB: out of memory); without
# them it is 99 MB with it.
RAMDISK_MODULES=(virtio_pci virtio_net virtio_blk virtio_scsi virtio_rng virtio_balloon virtio_input ahci ata_piix
  ata_generic sd_mod sr_mod sg isofs udf vfat nls_cp437 nls_ascii nls_utf8 nls_iso8859_1 ext4 xfs md_mod raid0
  raid1 raid10 raid456 linear dm_mod bonding 8021q e1000 e1000e igb ixgbe nvme loop efivarfs ipmi_devintf ipmi_si
  ipmi_ssif usb_storage uas xhci_pci ehci_pci uhci_hcd hid_generic usbhid i2c_i801 iTCO_wdt)
prune_ramdisk() {
  local dir="$1" kver
  kver="$(basename "$(ls -d "$dir"/lib/modules/*)")"
  python3 "$HERE/ramdisk_modules.py" "$dir/lib/modules/$kver" "${RAMDISK_MODULES[@]}"
  find "$dir/lib/modules/$kver/kernel" -type d -empty -delete
  chroot "$dir" depmod -a "$kver"  # the ramdisk's own kmod: a fresh host may have none
  chroot "$dir" /usr/bin/python3 -m compileall -q /usr/lib/python3 /usr/lib/python3.11 \
    /opt/ironic-python-agent/lib >/dev/null
}

pack_ramdisk() {
  local dir="$1" out="$2"
  shift 2
  log "packing the initramfs"
  (cd "$dir" && find . -xdev -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet -R 0:0) | "$@" > "$out"
}

# --- Debian cloud image ----------------------------------------------------------------------------------------
build_debian() {
  local raw="$work/debian.raw" dir="$work/debian" root_uuid efi_uuid kver
  log "partitioning a 2 GiB disk: BIOS boot, EFI system, ext4 root"
  truncate -s 2G "$raw"
  sgdisk -o -n1:2048:+1M -t1:ef02 -c1:bios -n2:0:+127M -t2:ef00 -c2:efi -n3:0:0 -t3:8300 -c3:root "$raw" >&2
  loop="$(losetup -f --show -P "$raw")"
  [[ -b "${loop}p3" ]] || partx -a "$loop" >&2  # some kernels leave the partition scan to us
  mkfs.vfat -F 32 -n EFI "${loop}p2" >&2
  # Features bookworm's GRUB reads.
  mkfs.ext4 -q -L root -O ^orphan_file,^metadata_csum_seed "${loop}p3" >&2
  root_uuid="$(blkid -s UUID -o value "${loop}p3")"
  efi_uuid="$(blkid -s UUID -o value "${loop}p2")"
  mkdir -p "$dir"
  mount "${loop}p3" "$dir"
  mkdir -p "$dir/boot/efi"

  log "debootstrap of the Debian cloud image"
  bootstrap "$dir" "systemd-sysv,udev,ca-certificates"
  cat > "$dir/etc/fstab" <<EOF
UUID=$root_uuid / ext4 errors=remount-ro 0 1
UUID=$efi_uuid /boot/efi vfat umask=0077 0 2
EOF
  echo debian > "$dir/etc/hostname"
  # dpkg leaves out documentation and the modules of desktops and radios, now and on every later install.
  {
    printf 'path-exclude=%s\n' /usr/share/doc/'*' /usr/share/man/'*' /usr/share/locale/'*'
    printf 'path-include=%s\n' /usr/share/doc/'*'/copyright
    for m in sound drivers/gpu drivers/media drivers/net/wireless drivers/bluetooth drivers/staging drivers/iio \
      drivers/infiniband net/wireless net/mac80211 net/bluetooth; do
      printf 'path-exclude=%s\n' "/lib/modules/*/kernel/$m/*" "/usr/lib/modules/*/kernel/$m/*"
    done
  } > "$dir/etc/dpkg/dpkg.cfg.d/90-lab-slim"
  chroot_up "$dir"
  # The loop device and the by-uuid links GRUB's scripts look for, in the chroot's own /dev.
  cp -a "$loop" "$loop"p* "$dir/dev/"
  mkdir -p "$dir/dev/disk/by-uuid"
  ln -s "../../$(basename "$loop")p3" "$dir/dev/disk/by-uuid/$root_uuid"
  ln -s "../../$(basename "$loop")p2" "$dir/dev/disk/by-uuid/$efi_uuid"
  mkdir -p "$dir/etc/default/grub.d"
  cat > "$dir/etc/default/grub.d/50-lab.cfg" <<'EOF'
GRUB_TIMEOUT=1
GRUB_CMDLINE_LINUX="console=tty0 console=ttyS0,115200"
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_TERMINAL="console serial"
GRUB_SERIAL_COMMAND="serial --speed=115200"
EOF
  log "installing the kernel, GRUB (BIOS and signed EFI), cloud-init, nftables"
  in_chroot "$dir" apt-get update -q
  # grub-install runs below, on the loop device.
  echo 'grub-pc grub-pc/install_devices_empty boolean true' | chroot "$dir" debconf-set-selections
  # The generic kernel: the cloud one has virtio, bonding and 8021q but no AHCI (q35's SATA disks and CD-ROMs)
  # nor e1000e. nftables: a MetalStackFirewall's user data applies its rule set with nft (the lab test reads it
  # back from inside the guest). mdadm: its initramfs hook assembles the software RAID the agent wrote the image
  # onto (a host's spec.raid.softwareRAIDVolumes), so that the root filesystem on it is found at boot.
  in_chroot "$dir" apt-get install -y -q --no-install-recommends linux-image-amd64 grub-pc \
    grub-efi-amd64-signed shim-signed cloud-init cloud-guest-utils netplan.io systemd-resolved \
    qemu-guest-agent openssh-server sudo ifenslave vlan iproute2 e2fsprogs \
    dosfstools less nftables mdadm
  kver="$(basename "$(ls -d "$dir"/lib/modules/*)")"
  for m in bonding 8021q virtio_net virtio_blk ahci; do
    find "$dir/lib/modules/$kver" -name "$m.ko*" | grep -q . ||
      grep -q "/$m.ko" "$dir/lib/modules/$kver/modules.builtin" ||
      { log "kernel $kver has no $m module"; exit 1; }
  done
  [[ -x "$dir/usr/sbin/nft" ]] || { log "the image has no nft"; exit 1; }
  [[ -s "$dir/usr/share/initramfs-tools/hooks/mdadm" ]] || { log "the image's initramfs has no mdadm hook"; exit 1; }
  # BIOS: GRUB in the BIOS boot partition.
  in_chroot "$dir" grub-install --target=i386-pc "$loop"
  in_chroot "$dir" update-grub
  grep -q "root=UUID=$root_uuid" "$dir/boot/grub/grub.cfg" || { log "grub.cfg does not boot UUID=$root_uuid"; exit 1; }

  cat > "$dir/etc/cloud/cloud.cfg.d/90-lab.cfg" <<'EOF'
# Ironic writes a config drive (config-2); NoCloud for seeds made by hand.
datasource_list: [ConfigDrive, NoCloud]
# netplan, rendered to systemd-networkd: bonds and VLANs from network_data.json.
system_info:
  network:
    renderers: [netplan, networkd]
EOF
  # The system's locale: C.UTF-8, built into glibc. Without one, cloud-init's locale module asks for en_US.UTF-8,
  # which Debian's locale-gen does not make from an argument, and update-locale fails: cloud-init's status is
  # error (seen in the lab).
  echo LANG=C.UTF-8 > "$dir/etc/default/locale"
  in_chroot "$dir" systemctl enable systemd-networkd systemd-resolved
  # cloud-init waits for network-online: one configured link is enough, and a NIC-less boot not held 2 minutes.
  mkdir -p "$dir/etc/systemd/system/systemd-networkd-wait-online.service.d"
  printf '[Service]\nExecStart=\nExecStart=/lib/systemd/systemd-networkd-wait-online --any --timeout=30\n' \
    > "$dir/etc/systemd/system/systemd-networkd-wait-online.service.d/lab.conf"
  in_chroot "$dir" usermod -p '*' root
  # Each machine makes its own host keys (cloud-init) and machine-id.
  rm -f "$dir"/etc/ssh/ssh_host_*
  # ... and sshd starts without cloud-init too.
  mkdir -p "$dir/etc/systemd/system/ssh.service.d"
  printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
    > "$dir/etc/systemd/system/ssh.service.d/host-keys.conf"
  # UEFI: shim and the signed GRUB at the removable path (EFI/BOOT/BOOTX64.EFI), which firmware with empty
  # NVRAM boots. Written with mtools, as grub-install would: the host kernel may lack vfat (it does here).
  # The signed GRUB reads its prefix, EFI/debian/grub.cfg, which hands over to the root's /boot/grub.
  # shellcheck disable=SC2016 # $root and $prefix are GRUB's variables, written as they are
  printf 'search.fs_uuid %s root\nset prefix=($root)/boot/grub\nconfigfile $prefix/grub.cfg\n' "$root_uuid" \
    > "$work/esp-grub.cfg"
  mmd -i "${loop}p2" ::/EFI ::/EFI/BOOT ::/EFI/debian
  mcopy -i "${loop}p2" "$dir/usr/lib/shim/shimx64.efi.signed" ::/EFI/BOOT/BOOTX64.EFI
  mcopy -i "${loop}p2" "$dir/usr/lib/shim/mmx64.efi.signed" ::/EFI/BOOT/mmx64.efi
  mcopy -i "${loop}p2" "$dir/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed" ::/EFI/BOOT/grubx64.efi
  mcopy -i "${loop}p2" "$work/esp-grub.cfg" ::/EFI/BOOT/grub.cfg
  mcopy -i "${loop}p2" "$work/esp-grub.cfg" ::/EFI/debian/grub.cfg
  mdir -i "${loop}p2" ::/EFI/BOOT/BOOTX64.EFI >/dev/null
  # The same binaries for the agent's ISO, with Debian's CD GRUB.
  mkdir -p "$work/efi"
  cp "$dir/usr/lib/shim/shimx64.efi.signed" "$work/efi/BOOTX64.EFI"
  cp "$dir/usr/lib/shim/mmx64.efi.signed" "$work/efi/mmx64.efi"
  cp "$dir/usr/lib/grub/x86_64-efi-signed/gcdx64.efi.signed" "$work/efi/grubx64.efi"
  chroot_down "$dir"
  rm -rf "$dir"/usr/share/{doc,man,info,locale}/*
  slim "$dir" compile
  umount "$dir"
  # Deleted files' blocks zeroed, so the qcow2 leaves them out (fstrim does not punch the loop's file here).
  zerofree "${loop}p3"
  losetup -d "$loop"
  loop=""
  log "converting to a compressed qcow2"
  qemu-img convert -c -O qcow2 "$raw" "$work/out/debian.qcow2"
  rm -f "$raw"
}

# --- the agent's ISO: isolinux for BIOS, shim + Debian's signed GRUB for UEFI (Secure Boot) ---------------------
build_iso() {
  local iso="$work/iso" cmdline="console=tty0 console=ttyS0,115200"
  mkdir -p "$iso/isolinux" "$iso/boot/grub" "$iso/.disk"
  cp "$work/out/ipa.kernel" "$iso/vmlinuz"
  cp "$work/out/ipa.initramfs" "$iso/initramfs"
  cp /usr/lib/ISOLINUX/isolinux.bin /usr/lib/syslinux/modules/bios/ldlinux.c32 "$iso/isolinux/"
  cat > "$iso/isolinux/isolinux.cfg" <<EOF
serial 0 115200
default ipa
prompt 0
timeout 0
label ipa
  kernel /vmlinuz
  initrd /initramfs
  append $cmdline
EOF
  # Debian's CD GRUB (gcdx64) finds the ISO by /.disk/info and reads /boot/grub/grub.cfg.
  echo "metal3.baremetal ironic-python-agent ${IPA_VERSION}" > "$iso/.disk/info"
  cat > "$iso/boot/grub/grub.cfg" <<EOF
serial --speed=115200
terminal_input console serial
terminal_output console serial
set timeout=0
menuentry "ironic-python-agent" {
  linux /vmlinuz $cmdline
  initrd /initramfs
}
EOF
  local img="$iso/boot/efiboot.img"
  mkfs.vfat -C -n IPA_EFI "$img" 8192 >/dev/null
  mmd -i "$img" ::/EFI ::/EFI/BOOT
  mcopy -i "$img" "$work/efi/BOOTX64.EFI" "$work/efi/grubx64.efi" "$work/efi/mmx64.efi" ::/EFI/BOOT/
  xorriso -as mkisofs -quiet -o "$work/out/ipa.iso" -V IPA -R -J -iso-level 3 \
    -b isolinux/isolinux.bin -c isolinux/boot.cat -no-emul-boot -boot-load-size 4 -boot-info-table \
    -isohybrid-mbr /usr/lib/ISOLINUX/isohdpfx.bin \
    -eltorito-alt-boot -e boot/efiboot.img -no-emul-boot -isohybrid-gpt-basdat "$iso" >&2
}

# --- the EFI system partition of Ironic's own virtual-media ISOs --------------------------------------------------
# Ironic puts it at boot/grub/efiboot.img on the ISO and its grub.cfg at [DEFAULT]grub_config_path. Debian's signed
# GRUB (not the CD one, whose prefix is /boot/grub) reads /EFI/debian/grub.cfg of the ISO it was loaded from: the
# ironic role's grub_config_path for these images.
build_esp() {
  local debs="$work/esp-debs" img="$work/esp.img" deb
  mkdir -p "$debs"
  for deb in shim-signed shim-helpers-amd64-signed grub-efi-amd64-signed; do
    (cd "$PACKAGES" && ls ${deb}_*.deb >/dev/null 2>&1) || (cd "$PACKAGES" && apt-get download -q "$deb" >&2)
    dpkg-deb -x "$(find "$PACKAGES" -maxdepth 1 -name "${deb}_*.deb" | sort -V | tail -n 1)" "$debs"
  done
  mkfs.vfat -C -n ESP "$img" 8192 >/dev/null
  mmd -i "$img" ::/EFI ::/EFI/BOOT
  mcopy -i "$img" "$debs/usr/lib/shim/shimx64.efi.signed" ::/EFI/BOOT/BOOTX64.EFI
  mcopy -i "$img" "$debs/usr/lib/shim/mmx64.efi.signed" ::/EFI/BOOT/mmx64.efi
  mcopy -i "$img" "$debs/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed" ::/EFI/BOOT/grubx64.efi
}

mkdir -p "$work/out"
start=$SECONDS
previous="$ROOT/lab-images-${PREVIOUS_REVISION}"
if [[ -z "${LAB_IMAGES_DIR:-}" && -s "$previous/esp.img" ]] && CACHE="$previous" complete; then
  log "from the ${PREVIOUS_REVISION} images: the cloud image made anew, the agent's ramdisk, its ISO and the ESP kept"
  for f in esp.img ipa.kernel ipa.initramfs ipa.iso; do
    ln "$previous/$f" "$work/out/$f" 2>/dev/null || cp "$previous/$f" "$work/out/$f"
  done
  build_debian
else
  build_esp
  mv "$work/esp.img" "$work/out/esp.img"
  build_ipa
  log "ramdisk built in $((SECONDS - start))s"
  build_debian
  log "cloud image built in $((SECONDS - start))s"
  build_iso
fi
(cd "$work/out" && sha256sum ipa.kernel ipa.initramfs ipa.iso debian.qcow2 > SHA256SUMS &&
  grep ' debian.qcow2$' SHA256SUMS > debian.qcow2.sha256)
log "built in $((SECONDS - start))s: $(cd "$work/out" && du -h ipa.initramfs ipa.iso debian.qcow2 | tr '\t\n' ' ')"
mkdir -p "$(dirname "$CACHE")"
# Renamed in whole: a killed build leaves no half cache, a concurrent one finds it complete.
mv -T "$work/out" "$CACHE" 2>/dev/null || complete
echo "$CACHE"
