#!/usr/bin/env bash
# make-initramfs.sh KVER PATTERN OUT [TLSDIR]: an uncompressed cpio initramfs for the
# kernel guest (DESIGN.md section 9): busybox-static, nbd-client and
# mkfs.ext4 with the libraries they link, the modules for virtio-net, nbd
# and ext4 (with their dependencies, in load order), init.sh as /init and
# PATTERN as /pattern; TLSDIR's ca-cert.pem, client-cert.pem and
# client-key.pem (an NBD client folder of make-certs nbd) as /tls.
# Environment (bench/guest.sh): GUEST_INIT, another /init; GUEST_TOOLS, more
# dynamically linked programs for /sbin (fio).
set -euo pipefail
kver=$1 pattern=$2 out=$3 tlsdir=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
mods=/lib/modules/$kver
[ -f "$mods/modules.dep" ] || { echo "make-initramfs: no modules for kernel $kver in $mods" >&2; exit 1; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,modules,lib64}
cp /bin/busybox "$root/bin/busybox"
# dynamically linked tools with their libraries (and the loader)
for tool in /usr/sbin/nbd-client /sbin/mke2fs ${GUEST_TOOLS:-}; do
  cp "$tool" "$root/sbin/"
  ldd "$tool" | awk '/=>/ { print $3 } /ld-linux/ { print $1 }' | while read -r lib; do
    [ -f "$lib" ] || continue
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
done
ln -s mke2fs "$root/sbin/mkfs.ext4"
[ -f /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$root/etc/"
# modules: each wanted one after its dependencies, each once
declare -A seen=()
order=()
add_mod () {
  local path=$1 dep
  [ -n "${seen[$path]:-}" ] && return 0
  seen[$path]=1
  for dep in $(sed -n "s|^$path: *||p" "$mods/modules.dep"); do add_mod "$dep"; done
  order+=("$path")
}
for m in virtio_pci virtio_net nbd crc32c_generic ext4; do
  path=$(grep -oE "^[^:]*/$m\.ko(\.[a-z]+)?:" "$mods/modules.dep" | head -1 | tr -d :)
  [ -n "$path" ] || { echo "make-initramfs: module $m not found for kernel $kver" >&2; exit 1; }
  add_mod "$path"
done
for p in "${order[@]}"; do
  case $p in *.ko) ;; *) echo "make-initramfs: compressed module $p is not supported" >&2; exit 1 ;; esac
  cp "$mods/$p" "$root/modules/"
  basename "$p" >> "$root/modules/order"
done
cp "${GUEST_INIT:-$here/init.sh}" "$root/init"
chmod +x "$root/init"
cp "$pattern" "$root/pattern"
if [ -n "$tlsdir" ]; then
  mkdir "$root/tls"
  for f in ca-cert.pem client-cert.pem client-key.pem; do cp "$tlsdir/$f" "$root/tls/" ; done
fi
(cd "$root" && find . | cpio -o -H newc --quiet) > "$out"
