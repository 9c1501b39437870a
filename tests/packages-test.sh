#!/usr/bin/env bash
# The Debian packages end to end, as `./appliance test --packages` runs it
# (not part of `make check`: it builds the packages and boots a Debian root,
# minutes). Usage: tests/packages-test.sh DEB_DIR
#
# A fresh Debian 12 root (debootstrap --variant=minbase, cached as a tar in
# $TROMCHO_ROOT_CACHE) gets the .debs with apt-get, then boots with systemd
# as PID 1 in systemd-nspawn (sharing the host's network). There: nbdkit finds
# the plugin (`nbdkit tromcho --help`), the man pages open, the tromcho user
# owns /var/lib/tromcho, systemd-analyze verify passes on every unit; the
# gateway, three OSDs and one nbdkit per tenant run from their systemd units
# with their sandboxing; the host writes and reads an encrypted image through
# NBD; an OSD killed with -9 is restarted by systemd; tromcho-fuse@ mounts;
# the same root, imported into podman with container/entrypoint, serves a
# tenant's images from a mounted config folder.
set -euo pipefail
DEBS=$(cd "$1" && pwd)
top=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${TROMCHO_ROOT_CACHE:-/var/cache/tromcho-appliance}
INCLUDE=systemd,systemd-sysv,dbus,adduser,man-db,nbdkit,fuse3,libnbd-bin
fail () { echo "FAIL: $*" >&2; exit 1; }
log () { printf '== %s\n' "$*" >&2; }

W=$(mktemp -d /var/tmp/tromcho-pkgtest.XXXXXX)
ROOT=$W/root
NSPAWN=
cleanup () {
  if [ -n "$NSPAWN" ] && kill -0 "$NSPAWN" 2>/dev/null; then
    in_root systemctl poweroff >/dev/null 2>&1 || kill "$NSPAWN" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$NSPAWN" 2>/dev/null || true
  fi
  [ -z "${CTR:-}" ] || "${PODMAN[@]}" rm -f "$CTR" >/dev/null 2>&1 || true
  [ -z "${IMAGE:-}" ] || "${PODMAN[@]}" rmi -f "$IMAGE" >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT

# The Debian root, made once and cached.
tarball=$CACHE/bookworm-minbase-$(echo "$INCLUDE" | md5sum | cut -c1-8).tar
if [ ! -f "$tarball" ]; then
  log "debootstrap bookworm (cached in $tarball)"
  mkdir -p "$CACHE" "$W/boot"
  debootstrap --variant=minbase --include="$INCLUDE" bookworm "$W/boot" http://deb.debian.org/debian >"$W/debootstrap.log" 2>&1 ||
    { tail "$W/debootstrap.log"; fail "debootstrap"; }
  tar cf "$tarball.tmp" -C "$W/boot" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$W/boot"
fi
mkdir -p "$ROOT"
tar xf "$tarball" -C "$ROOT"
mkdir -p "$ROOT/debs"
cp "$DEBS"/*.deb "$ROOT/debs/"
rm -f "$ROOT"/debs/*-dbgsym_*.deb

nspawn () { systemd-nspawn --keep-unit --register=no --quiet -D "$ROOT" "$@"; }
log "apt-get install the packages in a fresh Debian 12 root"
nspawn --pipe --bind=/var/cache/apt/archives sh -c \
  'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /debs/*.deb' \
  >"$W/install.log" 2>&1 || { tail -30 "$W/install.log"; fail "installing the packages"; }

# The container image: this root with the packages, and container/entrypoint.
# Podman runs here only with runc (crun refuses this machine's hybrid
# cgroup v1/v2 layout), cgroupfs (no systemd on the host) and rlimits at or
# below the host's (no CAP_SYS_RESOURCE to raise RLIMIT_NPROC).
IMAGE=localhost/tromcho-nbdkit-test:$$
PODMAN=(podman --runtime runc --cgroup-manager=cgroupfs)
CTR=
log "container image $IMAGE (podman import of the root)"
"$top/container/build-image" "$ROOT" "$IMAGE" || fail "container/build-image"

log "boot the root with systemd (systemd-nspawn)"
nspawn -b --console=pipe --bind=/dev/fuse >"$W/boot.log" 2>&1 &
NSPAWN=$!
SYSD=
for _ in $(seq 300); do
  child=$(pgrep -P "$NSPAWN" | head -1 || true)
  [ -n "$child" ] && SYSD=$(pgrep -P "$child" -x systemd | head -1 || true)
  [ -n "$SYSD" ] && break
  sleep 0.2
done
[ -n "$SYSD" ] || { cat "$W/boot.log"; fail "systemd did not start in the container"; }
in_root () { nsenter -t "$SYSD" -a "$@"; }
state=
for _ in $(seq 300); do
  state=$(in_root systemctl is-system-running 2>/dev/null || true)
  case $state in running|degraded) break ;; esac
  sleep 0.2
done
case $state in running|degraded) ;; *) fail "the container's systemd is '$state'" ;; esac

log "installed files, user, plugin, man pages"
in_root nbdkit tromcho --help | grep -q "image=<NAME>" || fail "nbdkit tromcho --help"
in_root nbdkit --dump-plugin tromcho | grep -q "^tromcho_version=" || fail "nbdkit --dump-plugin tromcho"
for page in nbdkit-tromcho-plugin tromcho tromcho-osd tromcho-gateway tromcho-fuse tromcho.conf; do
  in_root env MANWIDTH=80 man -P cat "$page" 2>/dev/null | grep -q "^NAME" || fail "man $page"
done
in_root getent passwd tromcho >/dev/null || fail "no tromcho user"
[ "$(in_root stat -c %U:%a /var/lib/tromcho)" = tromcho:750 ] || fail "/var/lib/tromcho: $(in_root stat -c %U:%a /var/lib/tromcho)"
in_root test -d /etc/tromcho || fail "no /etc/tromcho"
in_root systemd-analyze verify tromcho-gateway.service tromcho-osd@1.service nbdkit-tromcho@demo.service \
  tromcho-fuse@mnt-tromcho.service || fail "systemd-analyze verify in the root"

log "a cluster from the systemd units"
free_port () { python3 "$top/tests/free-port.py"; }
KVPORT=$(free_port); NBDPORT=$(free_port)
in_root tromcho make-certs --dir /etc/tromcho/certs >/dev/null || fail "make-certs"
# The config: the certificates' conf plus the KV address (no python in the root).
conf=$(in_root cat /etc/tromcho/certs/tromcho.conf)
conf=$(python3 -c 'import json,sys; c=json.loads(sys.argv[1]); c.update({"etcd_address": ["http://127.0.0.1:'"$KVPORT"'"], "gateway_address": "127.0.0.1:'"$KVPORT"'", "proto_checksums": "gcm", "log_level": "warn"}); print(json.dumps(c, indent=2))' "$conf")
printf '%s\n' "$conf" | in_root sh -c 'cat > /etc/tromcho/tromcho.conf'
in_root sh -c 'mkdir -p /etc/tromcho/nbdkit && cp /etc/tromcho/tromcho.conf /etc/tromcho/nbdkit/demo.conf &&
  printf "NBDKIT_PORT='"$NBDPORT"'\nNBDKIT_LISTEN=127.0.0.1\n" > /etc/tromcho/nbdkit/demo.env &&
  chgrp -R tromcho /etc/tromcho && chmod -R g+rX /etc/tromcho'
in_root systemctl start tromcho-gateway.service || { in_root journalctl -u tromcho-gateway --no-pager | tail; fail "start tromcho-gateway"; }
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$KVPORT/health" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$KVPORT/health" >/dev/null || { in_root journalctl -u tromcho-gateway --no-pager | tail; fail "gateway not healthy"; }
for n in 1 2 3; do
  in_root tromcho osd-create --data /var/lib/tromcho/osd$n.data --osd_num $n --size 2G >/dev/null || fail "osd-create $n"
  in_root chown -R tromcho:tromcho /var/lib/tromcho
  in_root systemctl start tromcho-osd@$n.service || { in_root journalctl -u tromcho-osd@$n --no-pager | tail; fail "start tromcho-osd@$n"; }
done
in_root tromcho pool-create rep3 --pg-size 3 --pg-minsize 2 --pg-count 16 --failure-domain osd >/dev/null || fail "pool-create"
active () { in_root tromcho pool-ls --json | python3 -c 'import json,sys; p=json.load(sys.stdin); p=p.get("pools",p) if isinstance(p,dict) else p; sys.exit(not (p and all(x.get("pgs_active")==x.get("pg_count") for x in p)))'; }
for _ in $(seq 300); do active && break; sleep 0.2; done
active || { in_root tromcho status; for n in 1 2 3; do in_root journalctl -u tromcho-osd@$n --no-pager | tail -5; done; fail "PGs not active"; }
in_root tromcho create demo -s 256M --enc_key auto >/dev/null || fail "create demo"
in_root systemctl start nbdkit-tromcho@demo.service || { in_root journalctl -u nbdkit-tromcho@demo --no-pager | tail; fail "start nbdkit-tromcho@demo"; }
URI=nbd://127.0.0.1:$NBDPORT/demo
for _ in $(seq 100); do nbdinfo --size "$URI" >/dev/null 2>&1 && break; sleep 0.2; done
[ "$(nbdinfo --size "$URI")" = $((256 << 20)) ] || { in_root journalctl -u nbdkit-tromcho@demo --no-pager | tail; fail "NBD export demo"; }
for u in tromcho-gateway tromcho-osd@1 nbdkit-tromcho@demo; do
  [ "$(in_root systemctl show -P User "$u")" = tromcho ] || fail "$u does not run as tromcho"
  in_root systemctl show -P ProtectSystem "$u" | grep -qx strict || fail "$u: ProtectSystem"
  pid=$(in_root systemctl show -P MainPID "$u")
  st=$(in_root cat "/proc/$pid/status")   # a PID of the container's namespace
  grep -q "^NoNewPrivs:[[:space:]]*1" <<<"$st" || fail "$u runs without NoNewPrivs"
  grep -q "^CapBnd:[[:space:]]*0000000000000000" <<<"$st" || fail "$u keeps capabilities"
  grep -q "^Seccomp:[[:space:]]*2" <<<"$st" || fail "$u has no syscall filter"
done

log "I/O through NBD from the host"
head -c 32M /dev/urandom > "$W/data"
nbdcopy "$W/data" "$URI" || fail "nbdcopy to the export"
nbdcopy "$URI" "$W/back" && cmp -n $((32 << 20)) "$W/back" "$W/data" || fail "the export reads back other data"

log "an OSD killed with -9 is restarted by systemd"
old=$(in_root systemctl show -P MainPID tromcho-osd@2)
in_root sh -c "kill -9 $old"
new=
for _ in $(seq 150); do
  new=$(in_root systemctl show -P MainPID tromcho-osd@2)
  [ "$new" != 0 ] && [ "$new" != "$old" ] && break
  sleep 0.2
done
[ "$new" != 0 ] && [ "$new" != "$old" ] || fail "tromcho-osd@2 was not restarted (MainPID $new)"
nbdcopy "$URI" "$W/back" && cmp -n $((32 << 20)) "$W/back" "$W/data" || fail "data after the OSD restart"

log "tromcho-fuse@ mounts the images"
in_root mkdir -p /mnt/tromcho
if in_root systemctl start tromcho-fuse@mnt-tromcho.service; then
  for _ in $(seq 100); do in_root test -f /mnt/tromcho/demo && break; sleep 0.2; done
  in_root test -f /mnt/tromcho/demo || { in_root journalctl -u tromcho-fuse@mnt-tromcho --no-pager | tail; fail "no /mnt/tromcho/demo"; }
  in_root cmp -n $((32 << 20)) /mnt/tromcho/demo - < "$W/data" || fail "FUSE shows other data"
  in_root systemctl stop tromcho-fuse@mnt-tromcho.service
else
  in_root journalctl -u tromcho-fuse@mnt-tromcho --no-pager | tail
  fail "start tromcho-fuse@mnt-tromcho"
fi
log "the nbdkit container serves the tenant's images (podman)"
mkdir -p "$W/tenant"
cp "$ROOT"/etc/tromcho/certs/* "$W/tenant/"
sed 's#/etc/tromcho/certs/#/etc/tromcho/tenant/#g' "$ROOT/etc/tromcho/tromcho.conf" > "$W/tenant/tromcho.conf"
CPORT=$(free_port)
CTR=$("${PODMAN[@]}" run -d --network=host --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 \
  -v "$W/tenant:/etc/tromcho/tenant:ro" -e NBD_PORT="$CPORT" -e NBD_LISTEN=127.0.0.1 "$IMAGE") ||
  fail "podman run"
CURI=nbd://127.0.0.1:$CPORT/demo
for _ in $(seq 150); do nbdinfo --size "$CURI" >/dev/null 2>&1 && break; sleep 0.2; done
[ "$(nbdinfo --size "$CURI" 2>/dev/null)" = $((256 << 20)) ] || { "${PODMAN[@]}" logs "$CTR"; fail "the container serves no demo"; }
nbdinfo --list "nbd://127.0.0.1:$CPORT" | grep -q 'export="demo"' || fail "the container's export list"
head -c 8M /dev/urandom > "$W/data2"
nbdcopy "$W/data2" "$CURI" || fail "nbdcopy into the container"
nbdcopy "$URI" "$W/back" && cmp -n $((8 << 20)) "$W/back" "$W/data2" || fail "the units' nbdkit does not see the container's writes"
"${PODMAN[@]}" rm -f "$CTR" >/dev/null; CTR=

in_root systemctl stop nbdkit-tromcho@demo tromcho-osd@1 tromcho-osd@2 tromcho-osd@3 tromcho-gateway
echo "packages-test: ok"
