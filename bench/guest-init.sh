#!/bin/busybox sh
# /init of bench/guest.sh's guest: attach the export with the kernel's
# nbd-client, time mkfs.ext4 of the whole device, then on the mounted file
# system (ext4's journal: each fsync is a journal commit, i.e. NBD writes,
# a FLUSH and a FUA write) run fio's journaling loads and time a sync after
# dirty data. Results go to the console between markers the host reads:
#   TC-TIME name seconds    TC-JSON-BEGIN name ... TC-JSON-END
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /tmp /mnt
fail () { echo "TC-GUEST-FAIL: $*"; sync; poweroff -f; }
arg () { sed -n "s/.*$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
# /proc/uptime in hundredths of a second (busybox date has no %N)
now () { awk '{ printf "%d", $1 * 100 }' /proc/uptime; }
timed () {  # timed NAME COMMAND...: TC-TIME NAME seconds
  local name=$1 t0 t1
  shift
  t0=$(now)
  "$@" || fail "$name: $*"
  t1=$(now)
  echo "TC-TIME $name $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 100 }')"
}
job () {  # job NAME FIO-OPTIONS...: fio's JSON between markers
  local name=$1
  shift
  fio --name="$name" --output-format=json --output=/tmp/"$name".json "$@" ||
    fail "fio $name"
  echo "TC-JSON-BEGIN $name"
  cat /tmp/"$name".json
  echo "TC-JSON-END"
}
export_name=$(arg tc.export)
secs=$(arg tc.secs)
while read -r m; do
  insmod "/modules/$m" || fail "insmod $m"
done < /modules/order
ip link set lo up && ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 || fail "network"
nbd-client -N "$export_name" "$(arg tc.host)" "$(arg tc.port)" /dev/nbd0 -nonetlink -b 4096 ||
  fail "nbd-client could not attach $export_name"
i=0
while [ "$(blockdev --getsize64 /dev/nbd0)" = 0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
echo "TC-ATTACHED size=$(blockdev --getsize64 /dev/nbd0)"

# the device itself, O_DIRECT at QD1: a write, and a write then a flush
job dev-write-4k --filename=/dev/nbd0 --direct=1 --rw=randwrite --bs=4k --size=256M \
  --ioengine=psync --runtime="$secs" --time_based
job dev-fsync-4k --filename=/dev/nbd0 --direct=1 --rw=randwrite --bs=4k --size=256M \
  --ioengine=psync --fsync=1 --runtime="$secs" --time_based
# mkfs.ext4 discards the device first (NBD trim), then writes its tables
timed mkfs mkfs.ext4 -q -F /dev/nbd0
mount -t ext4 /dev/nbd0 /mnt || fail "mount"
# a database's commit: 4 KiB written then fsync'd, one at a time
job fsync-4k --directory=/mnt --rw=randwrite --bs=4k --size=128M --ioengine=psync --fsync=1 \
  --runtime="$secs" --time_based
# a log's append: 4 KiB appended then fdatasync'd
job append-fdatasync --directory=/mnt --rw=write --bs=4k --size=64M --ioengine=psync --fdatasync=1 \
  --runtime="$secs" --time_based
# 256 MiB written through the guest's page cache, then one sync: the
# flush after dirty data
job dirty-256m --directory=/mnt --rw=write --bs=1M --size=256M --ioengine=psync
timed sync-after-256m sync
# 16 writers, each appending and fsyncing (a journal commit covers many)
job fsync-4k-16jobs --directory=/mnt --rw=randwrite --bs=4k --size=16M --ioengine=psync --fsync=1 \
  --numjobs=16 --group_reporting --runtime="$secs" --time_based
umount /mnt || fail "umount"
nbd-client -d /dev/nbd0 || fail "nbd-client -d"
echo "TC-GUEST-OK"
poweroff -f
