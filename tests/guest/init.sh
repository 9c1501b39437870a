#!/bin/busybox sh
# The throw-away guest's /init: attach an NBD export with the kernel's
# nbd client the way a user does, write and read raw bytes, mkfs.ext4 and
# mount a file system on it, then power off. Every step prints a marker on
# the console; the host test reads them (TC-GUEST-OK or TC-GUEST-FAIL).
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
fail () { echo "TC-GUEST-FAIL: $*"; sync; poweroff -f; }
arg () { sed -n "s/.*$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
export_name=$(arg tc.export)
while read -r m; do
  insmod "/modules/$m" || fail "insmod $m"
done < /modules/order
ip link set lo up && ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 || fail "network"

# -nonetlink: the ioctl interface, nbd-client stays until -d; with
# tc.tls=1 the tenant's NBD client certificate from /tls (TLS runs in
# nbd-client, the kernel talks to it through a socket pair)
tls=
[ "$(arg tc.tls)" = 1 ] && tls="-enable-tls -cacertfile /tls/ca-cert.pem -certfile /tls/client-cert.pem -keyfile /tls/client-key.pem -tlshostname localhost"
nbd-client -N "$export_name" 10.0.2.100 10809 /dev/nbd0 -nonetlink -b 4096 $tls ||
  fail "nbd-client could not attach $export_name"
# the device gets its size once nbd-client's child has handed the socket over
i=0
while [ "$(blockdev --getsize64 /dev/nbd0)" = 0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
echo "TC-ATTACHED size=$(blockdev --getsize64 /dev/nbd0)"

# raw bytes: the pattern at 64 MiB, through the page cache, fsync'd, read
# back after the cache is dropped
dd if=/pattern of=/dev/nbd0 bs=65536 seek=1024 conv=fsync 2>/dev/null || fail "dd write"
echo 3 > /proc/sys/vm/drop_caches
dd if=/dev/nbd0 of=/back bs=65536 skip=1024 count=64 2>/dev/null || fail "dd read"
cmp /back /pattern || fail "the bytes read back differ"
echo "TC-RAW ok"

# a file system on the first 32 MiB (the pattern stays untouched)
mkfs.ext4 -q -F /dev/nbd0 32M || fail "mkfs.ext4"
mkdir -p /mnt
mount -t ext4 /dev/nbd0 /mnt || fail "mount"
cp /pattern /mnt/pattern && mkdir /mnt/dir && echo "written by the guest's kernel" > /mnt/dir/hello || fail "write files"
umount /mnt || fail "umount"
echo 3 > /proc/sys/vm/drop_caches
mount -t ext4 -o ro /dev/nbd0 /mnt || fail "mount again"
cmp /mnt/pattern /pattern || fail "the file read back differs"
umount /mnt
echo "TC-FS ok"
nbd-client -d /dev/nbd0 || fail "nbd-client -d"
echo "TC-GUEST-OK"
poweroff -f
