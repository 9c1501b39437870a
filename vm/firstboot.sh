#!/bin/sh
# The tromcho appliance's first boot (tromcho-firstboot.service, vm/README.md):
# the certificates, a config, the gateway, three OSDs on the data disk (or
# on files under /var/lib/tromcho), a pool, an encrypted image owned by the
# user tenant, and nbdkit-tromcho@tenant serving it over NBD on port 10809
# of every address. Every unit is enabled, so later boots start the same
# cluster. With the tenant's NBD TLS server files from the host (QEMU
# fw_cfg items opt/tromcho/nbd-tls/ca-cert.pem, server-cert.pem and
# server-key.pem, as `tromcho make-certs nbd` writes them), a second nbdkit,
# nbdkit-tromcho@tenant-tls, serves the same images on port 10810 with TLS
# required and client certificates of that CA only.
# Markers on the console: TROMCHO-FIRSTBOOT-OK or -FAIL.
set -eu
E=/etc/tromcho C=/etc/tromcho/certs L=/var/lib/tromcho
KV=127.0.0.1:2379 IMAGE=${TROMCHO_VM_IMAGE:-demo} SIZE=${TROMCHO_VM_SIZE:-1G} TENANT=tenant
fail () { echo "TROMCHO-FIRSTBOOT-FAIL: $*"; exit 1; }
say () { echo "tromcho-firstboot: $*"; }
# wait_for SECONDS COMMAND...
wait_for () {
  n=$(( $1 * 5 )); shift
  while [ "$n" -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; n=$((n - 1)); done
  return 1
}

# The OSDs' disk: the virtual disk with serial tromcho-data, formatted
# once; without it, files on the root file system.
data=$L/osds
disk=/dev/disk/by-id/virtio-tromcho-data
mkdir -p "$data"
if [ -b "$disk" ]; then
  if ! blkid "$disk" >/dev/null 2>&1; then
    say "formatting $(readlink -f "$disk") for the OSDs"
    mkfs.ext4 -q -L tromcho-data "$disk" || fail "mkfs.ext4 $disk"
  fi
  grep -q '^LABEL=tromcho-data ' /etc/fstab ||
    echo "LABEL=tromcho-data $data ext4 defaults,nofail 0 2" >> /etc/fstab
  mountpoint -q "$data" || mount "$data" || fail "mount $data"
fi
chown tromcho:tromcho "$data"
chmod 0750 "$data"

say "certificates in $C"
[ -f "$C/admin.crt" ] || tromcho make-certs --dir "$C" >/dev/null || fail "make-certs"
[ -f "$C/$TENANT.crt" ] || tromcho make-certs user "$TENANT" --dir "$C" >/dev/null || fail "make-certs user $TENANT"

# One config for the daemons and the administrator on this machine (the
# units read /etc/tromcho/tromcho.conf): the KV over HTTPS with client
# certificates and use_perms, on loopback only; the first administrator is
# written into the gateway's store at its start.
common="\"etcd_address\": [\"https://$KV\"], \"use_perms\": true, \"proto_checksums\": \"gcm\", \"log_level\": \"warn\", \"etcd_quick_timeout\": 3000"
cat > "$E/tromcho.conf" <<CONF
{
  "osd_ca": "$C/osd_ca.crt", "client_ca": "$C/client_ca.crt", "mon_ca": "$C/mon_ca.crt",
  "osd_cert": "$C/osd_ca.crt", "osd_pkey": "$C/osd_ca.key",
  "antietcd_cert": "$C/antietcd.crt", "antietcd_key": "$C/antietcd.key", "etcd_ca": "$C/antietcd.crt",
  "mon_etcd_client_cert": "$C/mon_ca.crt", "mon_etcd_client_key": "$C/mon_ca.key",
  "cert": "$C/admin.crt", "pkey": "$C/admin.key",
  "gateway_address": "$KV", "gateway_bootstrap_admin": "admin",
  $common
}
CONF
# nbdkit acts as the user tenant, never as the administrator.
mkdir -p "$E/nbdkit"
cat > "$E/nbdkit/$TENANT.conf" <<CONF
{
  "osd_ca": "$C/osd_ca.crt", "etcd_ca": "$C/antietcd.crt",
  "cert": "$C/$TENANT.crt", "pkey": "$C/$TENANT.key",
  $common
}
CONF
# Plain NBD on every address of the VM: the host reaches it only through
# QEMU's user network (hostfwd to the host's loopback).
printf 'NBDKIT_PORT=10809\nNBDKIT_LISTEN=0.0.0.0\nNBDKIT_TLS=\n' > "$E/nbdkit/$TENANT.env"
units="nbdkit-tromcho@$TENANT.service"
modprobe qemu_fw_cfg 2>/dev/null || true
fw=/sys/firmware/qemu_fw_cfg/by_name/opt/tromcho/nbd-tls
if [ -f "$fw/server-key.pem/raw" ]; then
  tls=$E/nbdkit/$TENANT-tls
  mkdir -p "$tls"
  for f in ca-cert.pem server-cert.pem server-key.pem; do
    cat "$fw/$f/raw" > "$tls/$f" || fail "fw_cfg opt/tromcho/nbd-tls/$f"
  done
  cp "$E/nbdkit/$TENANT.conf" "$E/nbdkit/$TENANT-tls.conf"
  printf 'NBDKIT_PORT=10810\nNBDKIT_LISTEN=0.0.0.0\nNBDKIT_TLS=--tls=require --tls-certificates=%s --tls-verify-peer\n' \
    "$tls" > "$E/nbdkit/$TENANT-tls.env"
  units="$units nbdkit-tromcho@$TENANT-tls.service"
  say "NBD over TLS on port 10810 (the host's NBD CA for $TENANT)"
fi
chgrp -R tromcho "$E"
chmod -R g+rX,o-rwx "$E"

say "gateway (KV on https://$KV, monitor)"
systemctl enable --now tromcho-gateway.service || fail "start tromcho-gateway"
wait_for 120 tromcho pool-ls || { journalctl -u tromcho-gateway --no-pager | tail; fail "the gateway does not answer"; }

for n in 1 2 3; do
  if [ ! -f "$data/osd$n.data" ]; then
    tromcho osd-create --data "$data/osd$n.data" --osd_num $n --size 2G >/dev/null || fail "osd-create $n"
  fi
done
chown -R tromcho:tromcho "$data"
systemctl enable --now tromcho-osd@1.service tromcho-osd@2.service tromcho-osd@3.service || fail "start the OSDs"
say "three OSDs on $data"

tromcho pool-ls --json | grep -q '"rep3"' ||
  tromcho pool-create rep3 --pg-size 3 --pg-minsize 2 --pg-count 32 --failure-domain osd >/dev/null || fail "pool-create"
active () { tromcho pool-ls --json | grep -Eq '"state": ?"active"'; }
wait_for 300 active || { tromcho status; fail "the pool's PGs are not active"; }

tromcho info "$IMAGE" >/dev/null 2>&1 ||
  tromcho create "$IMAGE" -s "$SIZE" --enc_key auto --owner "$TENANT" >/dev/null || fail "create $IMAGE"
say "encrypted image $IMAGE ($SIZE), owned by $TENANT"

# shellcheck disable=SC2086
systemctl enable --now $units || fail "start $units"
touch "$L/firstboot.done"
echo "TROMCHO-FIRSTBOOT-OK nbd://THIS-MACHINE:10809/$IMAGE"
