#!/usr/bin/env bash
# test-client-failover.sh with keys and transport mode gcm, where the
# cluster client seals an encrypted image's ciphertext in place: writes
# resent after kill -9 of an OSD, and unsynced writes replayed after an OSD
# is lost for good, must read back exactly as written.
FAILOVER_MODE=gcm exec "${top_srcdir:-$(dirname "$0")/..}/tests/test-client-failover.sh"
