#!/usr/bin/env bash
# cpubench-peers.sh [SECONDS]: tromcho's `cpubench` next to its peers on this
# CPU, in one go, then a comparison table:
#   openssl speed -elapsed -seconds S -evp aes-256-xts / aes-256-gcm
#                 at 4096 bytes and 1 MiB
#   gnutls-cli --benchmark-ciphers   (AES-256-XTS and AES-128-GCM at 16 KiB;
#                 it has no AES-256-GCM line and takes ~100 s; GNUTLS=0 skips it)
#   tromcho cpubench --seconds S --json
# Units: GB/s = 10^9 bytes/s everywhere in the table (cpubench's MB are
# 2^20 bytes and are converted). The openssl and tromcho runs are repeated
# ROUNDS times (default 3), interleaved, and the best of each is kept, so
# that other load on a shared machine hurts both sides alike and little.
# Benchmarks print figures, never pass/fail.
# TROMCHO=path/to/tromcho picks the binary (default: ../cli/tromcho next to
# this script's build folder, else tromcho on PATH).
set -u
S=${1:-2}
case $S in (""|0|*[!0-9]*) echo "usage: $0 [SECONDS] (a whole number, default 2)" >&2; exit 2;; esac
here=$(cd "$(dirname "$0")" && pwd)
tromcho=${TROMCHO:-}
if [ -z "$tromcho" ]; then
  for t in "$PWD/cli/tromcho" "$here/../cli/tromcho" "$(command -v tromcho 2>/dev/null)"; do
    [ -n "$t" ] && [ -x "$t" ] && { tromcho=$t; break; }
  done
fi
[ -n "$tromcho" ] || { echo "$0: tromcho not found: set TROMCHO=path/to/cli/tromcho" >&2; exit 1; }
command -v openssl >/dev/null || { echo "$0: openssl is not installed" >&2; exit 1; }
command -v python3 >/dev/null || { echo "$0: python3 is needed for the table" >&2; exit 1; }
out=$(mktemp -d /tmp/cpubench-peers.XXXXXX)
trap 'rm -rf "$out"' EXIT

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) threads; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "OpenSSL $(openssl version | cut -d' ' -f2), $(gnutls-cli --version 2>/dev/null | head -1), tromcho $tromcho"
rounds=${ROUNDS:-3}
for r in $(seq "$rounds"); do
  echo "round $r of $rounds:"
  for c in aes-256-xts aes-256-gcm; do
    for b in 4096 1048576; do
      echo "  openssl speed -elapsed -seconds $S -evp $c -bytes $b"
      openssl speed -elapsed -seconds "$S" -mr -evp "$c" -bytes "$b" > "$out/openssl-$c-$b.$r" 2>/dev/null ||
        echo "  (failed)"
    done
  done
  echo "  tromcho cpubench --seconds $S --json"
  "$tromcho" cpubench --seconds "$S" --json > "$out/tromcho.$r" || { echo "$0: tromcho cpubench failed" >&2; exit 1; }
done
if [ "${GNUTLS:-1}" != 0 ] && command -v gnutls-cli >/dev/null; then
  echo "gnutls-cli --benchmark-ciphers (about 100 s) ..."
  gnutls-cli --benchmark-ciphers > "$out/gnutls" 2>&1 || echo "  (failed)"
else
  : > "$out/gnutls"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$out" <<'PY'
import json, os, re, sys
d = sys.argv[1]
import glob
def openssl(c, b):
    best = None
    for path in glob.glob(os.path.join(d, f"openssl-{c}-{b}.*")):
        for line in open(path):
            if line.startswith("+F:"):          # +F:n:ALG:bytes_per_second
                v = float(line.strip().split(":")[3]) / 1e9
                best = v if best is None or v > best else best
    return best
def gnutls(name):
    for line in open(os.path.join(d, "gnutls")):
        m = re.match(r"\s*(\S+)\s+([\d.]+)\s+(GB|MB)/sec", line)
        if m and m.group(1) == name:
            return float(m.group(2)) / (1 if m.group(3) == "GB" else 1000)
    return None
ours = {}
for path in glob.glob(os.path.join(d, "tromcho.*")):
    for r in json.load(open(path)):
        k, v = (r["scenario"], r["block_size"]), r["mb_per_s"] * 1048576 / 1e9
        ours[k] = max(v, ours.get(k, 0))
def our(label, size):
    return ours.get((label, size))
def pct(a, b):
    return f"{100 * a / b:6.1f}%" if a and b else "    n/a"
def f(x):
    return f"{x:7.2f}" if x else "    n/a"
def harmonic(*xs):   # one pass doing each of xs in turn
    return 1 / sum(1 / x for x in xs) if all(xs) else None

xts4k_peer = max(x for x in (openssl("aes-256-xts", 4096), gnutls("AES-256-XTS")) if x) if (openssl("aes-256-xts", 4096) or gnutls("AES-256-XTS")) else None
rows = [
    ("AES-256-XTS 4 KiB", our("AES-256-XTS encrypt", 4096), xts4k_peer,
     "faster of openssl 4 KiB / gnutls-cli 16 KiB"),
    ("AES-256-XTS 1 MiB", our("AES-256-XTS encrypt", 1 << 20), openssl("aes-256-xts", 1 << 20), "openssl"),
    ("GCM header+payload 4 KiB", our("AES-256-GCM encrypt header and", 4096), openssl("aes-256-gcm", 4096),
     "openssl AES-256-GCM 4 KiB"),
    ("GCM header+payload 1 MiB", our("AES-256-GCM encrypt header and", 1 << 20), openssl("aes-256-gcm", 1 << 20),
     "openssl AES-256-GCM 1 MiB"),
    ("XTS + GCM 4 KiB", our("AES-256-XTS + AES-256-GCM encrypt", 4096),
     harmonic(openssl("aes-256-xts", 4096), openssl("aes-256-gcm", 4096)), "openssl XTS then GCM, combined"),
    ("XTS + GCM 1 MiB", our("AES-256-XTS + AES-256-GCM encrypt", 1 << 20),
     harmonic(openssl("aes-256-xts", 1 << 20), openssl("aes-256-gcm", 1 << 20)), "openssl XTS then GCM, combined"),
    ("xxhash3 1 MiB", our("xxhash3", 1 << 20), 30.0, "the 30 GB/s goal"),
    ("xxhash3 4 KiB", our("xxhash3", 4096), 30.0, "the 30 GB/s goal"),
    ("XTS + xxhash3 1 MiB", our("AES-256-XTS encrypt + xxhash3", 1 << 20),
     harmonic(our("AES-256-XTS encrypt", 1 << 20), our("xxhash3", 1 << 20)), "our XTS and xxhash3 alone, combined"),
]
print()
print(f"{'GB/s (10^9 B/s)':<26} {'tromcho':>7} {'peer':>7} {'ours/peer':>9}  peer")
for name, a, b, what in rows:
    print(f"{name:<26} {f(a)} {f(b)} {pct(a, b):>9}  {what}")
g = gnutls("AES-128-GCM")
if g:
    print(f"(gnutls-cli AES-128-GCM 16 KiB: {g:.2f} GB/s; it prints no AES-256-GCM line)")
PY
