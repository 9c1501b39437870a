#!/usr/bin/env bash
# vm/build-image.sh [--debs DIR] [--size 6G] OUT.qcow2: a bootable qcow2 disk
# of the tromcho appliance (vm/README.md): Debian 12 with its kernel,
# systemd, systemd-networkd (DHCP on the first NIC), the tromcho packages
# (the .debs in DIR, default ./packages: `./appliance packages`) and
# tromcho-firstboot.service, which on the first boot makes the certificates,
# a cluster on the machine's own disks and the NBD export (vm/firstboot.sh).
#
# No loop device and no mount: the root is a debootstrap folder (the base,
# without the packages, cached as a tar in $TROMCHO_VM_CACHE, default
# /var/tmp/tromcho-vm), made into an ext4 image with mkfs.ext4 -d; the EFI
# system partition (systemd-boot, the kernel and its initrd) is a FAT image
# made with mkfs.vfat and filled with mtools; both are written with dd into
# a GPT disk laid out with sfdisk, then converted with qemu-img. It boots
# with UEFI (OVMF).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
debs=$top/packages size=6G
while [ $# -gt 1 ]; do
  case $1 in
    --debs) debs=$2; shift ;;
    --size) size=$2; shift ;;
    *) break ;;
  esac
  shift
done
[ $# = 1 ] || { echo "usage: vm/build-image.sh [--debs DIR] [--size 6G] OUT.qcow2" >&2; exit 2; }
out=$1
CACHE=${TROMCHO_VM_CACHE:-/var/tmp/tromcho-vm}
INCLUDE=systemd,systemd-sysv,dbus,udev,adduser,linux-image-amd64,initramfs-tools,iproute2,nbdkit,fuse3,libnbd-bin,libjson-c5,libmicrohttpd12,liburing2,libipsec-mb1,liblmdb0,libcurl3-gnutls
SDBOOT=/usr/lib/systemd/boot/efi/systemd-bootx64.efi
ESP_MIB=128
log () { printf '== %s\n' "$*" >&2; }
die () { echo "build-image: $*" >&2; exit 1; }
for t in debootstrap mkfs.ext4 mkfs.vfat mcopy sfdisk qemu-img; do
  command -v "$t" >/dev/null || die "$t is missing (packages debootstrap, e2fsprogs, dosfstools, mtools, fdisk, qemu-utils)"
done
[ -f "$SDBOOT" ] || die "no $SDBOOT (package systemd-boot-efi)"
ls "$debs"/tromcho_*.deb >/dev/null 2>&1 || die "no tromcho .debs in $debs (./appliance packages --out $debs)"
[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot, file ownership in the image)"

W=$(mktemp -d /var/tmp/tromcho-vmbuild.XXXXXX)
R=$W/root
cleanup () {
  umount "$R/proc" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT

# The base root, made once.
base=$CACHE/bookworm-vm-$(echo "$INCLUDE" | md5sum | cut -c1-8).tar
if [ ! -f "$base" ]; then
  log "debootstrap bookworm (cached in $base)"
  mkdir -p "$CACHE"
  debootstrap --variant=minbase --include="$INCLUDE" bookworm "$W/base" http://deb.debian.org/debian \
    >"$W/debootstrap.log" 2>&1 || { tail "$W/debootstrap.log"; die "debootstrap failed"; }
  tar cf "$base.tmp" -C "$W/base" . && mv "$base.tmp" "$base"
  rm -rf "$W/base"
fi
mkdir "$R"
tar xf "$base" -C "$R"

log "the tromcho packages"
mkdir "$R/tmp/debs"
cp "$debs"/*.deb "$R/tmp/debs/"
rm -f "$R"/tmp/debs/*-dbgsym_*.deb
mount -t proc proc "$R/proc"
cp /etc/resolv.conf "$R/etc/resolv.conf"
# Their dependencies are in the base; apt-get fetches only what is not.
chroot "$R" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/debs/*.deb' \
  >"$W/install.log" 2>&1 || { tail -30 "$W/install.log"; die "installing the packages failed"; }
rm -rf "$R/tmp/debs"
chroot "$R" apt-get clean
umount "$R/proc"

log "system configuration"
uuid_part=$(cat /proc/sys/kernel/random/uuid)
uuid_fs=$(cat /proc/sys/kernel/random/uuid)
echo tromcho > "$R/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 tromcho\n::1 localhost ip6-localhost ip6-loopback\n' > "$R/etc/hosts"
printf 'PARTUUID=%s / ext4 errors=remount-ro 0 1\n' "$uuid_part" > "$R/etc/fstab"
: > "$R/etc/resolv.conf"
# A new machine-id on the first boot; no interactive systemd-firstboot.
: > "$R/etc/machine-id"
rm -f "$R/var/lib/dbus/machine-id"
ln -sf /dev/null "$R/etc/systemd/system/systemd-firstboot.service"
cat > "$R/etc/systemd/network/80-tromcho-vm.network" <<'NET'
[Match]
Name=en* eth*

[Network]
DHCP=yes
NET
install -D -m 0755 "$top/vm/firstboot.sh" "$R/usr/lib/tromcho/firstboot"
install -m 0644 "$top/vm/tromcho-firstboot.service" "$R/etc/systemd/system/tromcho-firstboot.service"
chroot "$R" systemctl enable --quiet systemd-networkd.service tromcho-firstboot.service
v=$(chroot "$R" systemd-analyze verify --man=no tromcho-firstboot.service 2>&1) || die "systemd-analyze verify: $v"
[ -z "$v" ] || die "systemd-analyze verify warns: $v"

kver=$(cd "$R/boot" && ls vmlinuz-* | sed 's/^vmlinuz-//' | sort -V | tail -n 1)
[ -n "$kver" ] || die "no kernel in the root"
cmdline="root=PARTUUID=$uuid_part ro console=ttyS0 systemd.firstboot=off"

log "EFI system partition: systemd-boot, Linux $kver"
esp=$W/esp.img
mkfs.vfat -n ESP -C "$esp" $((ESP_MIB * 1024)) >/dev/null
mmd -i "$esp" ::/EFI ::/EFI/BOOT ::/loader ::/loader/entries
mcopy -i "$esp" "$SDBOOT" ::/EFI/BOOT/BOOTX64.EFI
mcopy -i "$esp" "$R/boot/vmlinuz-$kver" ::/vmlinuz
mcopy -i "$esp" "$R/boot/initrd.img-$kver" ::/initrd.img
printf 'default tromcho.conf\ntimeout 0\n' > "$W/loader.conf"
printf 'title tromcho appliance (Debian 12, Linux %s)\nlinux /vmlinuz\ninitrd /initrd.img\noptions %s\n' \
  "$kver" "$cmdline" > "$W/entry.conf"
mcopy -i "$esp" "$W/loader.conf" ::/loader/loader.conf
mcopy -i "$esp" "$W/entry.conf" ::/loader/entries/tromcho.conf

log "root file system (mkfs.ext4 -d, $size)"
rootimg=$W/root.img
mkfs.ext4 -q -L tromcho-root -U "$uuid_fs" -d "$R" "$rootimg" "$size" >/dev/null || die "mkfs.ext4 -d failed"
rm -rf "$R"

log "GPT disk"
disk=$W/disk.img
esp_start=2048 esp_sectors=$((ESP_MIB * 2048))
root_start=$((esp_start + esp_sectors)) root_sectors=$(( $(stat -c %s "$rootimg") / 512 ))
truncate -s $(( (root_start + root_sectors + 2048) * 512 )) "$disk"
sfdisk -q "$disk" <<SF || die "sfdisk failed"
label: gpt
start=$esp_start, size=$esp_sectors, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=ESP
start=$root_start, size=$root_sectors, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, uuid=$uuid_part, name=root
SF
dd if="$esp" of="$disk" bs=1M seek=$((esp_start / 2048)) conv=notrunc,sparse status=none
dd if="$rootimg" of="$disk" bs=1M seek=$((root_start / 2048)) conv=notrunc,sparse status=none
rm -f "$esp" "$rootimg"
qemu-img convert -f raw -O qcow2 "$disk" "$out.tmp" && mv "$out.tmp" "$out"
log "$out: $(qemu-img info --output=json "$out" | sed -n 's/.*"virtual-size": \([0-9]*\).*/\1/p') bytes virtual, $(du -h "$out" | cut -f1) on disk"
