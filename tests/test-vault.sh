#!/usr/bin/env bash
# Image keys in Vault, against the stand-in (tests/vault-standin.py: real
# TLS, certificate login, per-certificate policies, Vault's JSON shapes).
# The seed's testimg3 walk-through step by step, then what goes wrong:
# no Vault account, a policy without the secret, no such secret, malformed
# keys, vault_url unset, Vault stopped; and one client's token: cached,
# renewed before expiry, replaced after revocation or expiry; a secret
# changed while an image is open.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
. "$top_srcdir/tests/kv-functions.sh"
. "$top_srcdir/tests/cluster-functions.sh"
. "$top_srcdir/tests/vault-functions.sh"
requires tromcho tromcho-osd curl python3 openssl
TOOL=$top_builddir/tests/client-tool
start_kv
P=$TESTDIR/pki
tromcho make-certs --dir "$P" >/dev/null || fail "make-certs"
start_vault "$P/client_ca.crt"
EXTRA_CONF=", \"use_perms\": true, \"osd_ca\": \"$P/osd_ca.crt\", \"client_ca\": \"$P/client_ca.crt\", \"osd_cert\": \"$P/osd_ca.crt\", \"osd_pkey\": \"$P/osd_ca.key\", \"cert\": \"$P/admin.crt\", \"pkey\": \"$P/admin.key\", \"vault_url\": \"$VAULT_URL\", \"vault_ca\": \"$VAULT_CA\"" write_conf
admin_cn=$(openssl x509 -noout -subject -nameopt multiline -in "$P/admin.crt" | sed -n 's/ *commonName *= *//p')
kv_put "/config/user/$admin_cn" '{"type": "admin"}'
kv_put /config/pools '{"1": {"name": "pool1", "pg_count": 2, "pg_size": 2, "pg_minsize": 1}}'
start_osd 1
start_osd 2
set_pgs 1 2 "1 2"
as () { local u=$1; shift; tromcho --cert "$P/$u.crt" --pkey "$P/$u.key" "$@"; }
json_str () { python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()))' "$1"; }

# --- the seed's walk-through ---
# 8. a test secret
KEY=$(openssl rand -hex 64)
vault_api POST secret/vitastor/testimg3 "{\"key\": \"$KEY\"}" || fail "kv put"
# 9. a certificate for the user, signed by client_ca (openssl, as the seed)
openssl req -subj '/CN=testimg3' -nodes -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -keyout "$P/testimg3.key" -out "$TESTDIR/testimg3.csr" 2>/dev/null || fail "csr"
printf 'extendedKeyUsage=clientAuth\n' > "$TESTDIR/ext"
openssl x509 -req -days 2 -CA "$P/client_ca.crt" -CAkey "$P/client_ca.key" -CAcreateserial -extfile "$TESTDIR/ext" \
  -in "$TESTDIR/testimg3.csr" -out "$P/testimg3.crt" 2>/dev/null || fail "sign testimg3"
# 10. a policy and the certificate's Vault account
vault_api PUT sys/policy/testimg3 "{\"policy\": $(printf 'path "/secret/vitastor/testimg3" {\n    capabilities = ["read"]\n}\n' | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')}" ||
  fail "policy write"
vault_api POST auth/cert/certs/testimg3 "{\"certificate\": $(json_str "$P/testimg3.crt"), \"display_name\": \"testimg3\", \"token_ttl\": \"24h\", \"token_policies\": \"testimg3\"}" ||
  fail "cert entry"
# 11. access by hand, with curl
TOKEN=$(curl -sf --cacert "$VAULT_CA" --cert "$P/testimg3.crt" --key "$P/testimg3.key" --json '{}' \
  "$VAULT_URL/v1/auth/cert/login" | python3 -c 'import json,sys; print(json.load(sys.stdin)["auth"]["client_token"])') ||
  fail "curl login"
got=$(curl -sf --cacert "$VAULT_CA" --cert "$P/testimg3.crt" --key "$P/testimg3.key" -H "X-Vault-Token: $TOKEN" \
  "$VAULT_URL/v1/secret/vitastor/testimg3" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["key"])')
[ "$got" = "$KEY" ] || fail "curl secret read"
# 12. the image, made by the administrator (who has no Vault account)
tromcho create -s 100M --enc_key vault:vitastor/testimg3 --owner testimg3 testimg3 >/dev/null || fail "create testimg3"
# 13. data written and read back as testimg3
head -c 4M /dev/urandom > "$TESTDIR/data"
as testimg3 dd if="$TESTDIR/data" oimg=testimg3 bs=1M 2>/dev/null || fail "dd as testimg3"
as testimg3 dd iimg=testimg3 of="$TESTDIR/back" bs=1M count=4 2>/dev/null || fail "dd back as testimg3"
cmp "$TESTDIR/data" "$TESTDIR/back" || fail "testimg3 reads back wrong"
echo "walk-through: testimg3 written and read back with its key from Vault"

# The stored sector is XTS with exactly Vault's key; the KV never holds it.
"$TOOL" rawread testimg3 8192 4096 > "$TESTDIR/ct" || fail "raw read"
python3 - "$KEY" 2 "$TESTDIR/ct" "$TESTDIR/pt" <<'PY' || fail "decrypt"
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
key, sector = bytes.fromhex(sys.argv[1]), int(sys.argv[2])
d = Cipher(algorithms.AES(key), modes.XTS(sector.to_bytes(16, "little"))).decryptor()
open(sys.argv[4], "wb").write(d.update(open(sys.argv[3], "rb").read()) + d.finalize())
PY
cmp "$TESTDIR/pt" <(dd if="$TESTDIR/data" bs=4096 skip=2 count=1 2>/dev/null) || fail "stored sector is not XTS under Vault's key"
dump=$(curl -sf -X POST "$KV_URL/v3/kv/range" -d "{\"key\": \"AA==\", \"range_end\": \"AA==\"}" |
  python3 -c 'import base64,json,sys; [print(base64.b64decode(k.get("value", "")).decode(errors="replace")) for k in json.load(sys.stdin).get("kvs", [])]')
echo "$dump" | grep -qF "\"enc_key\":\"vault:vitastor\\/testimg3\"" || fail "the record does not name the Vault secret"
echo "$dump" | grep -qi "$KEY" && fail "the key is in the KV"
grep -qi "$KEY" "$TESTDIR"/osd*/log "$TESTDIR/vault/log" && fail "the key is in a log"
echo "stored data is XTS under Vault's key; the key is in neither the KV nor a log"

# --- what goes wrong, each named ---
expect_fail "image testimg3: Vault refused the login with certificate .*admin.crt \(HTTP 400: invalid certificate" \
  tromcho dd iimg=testimg3 of=/dev/null count=1
tromcho make-certs user other --dir "$P" >/dev/null || fail "make-certs user other"
vault_api PUT sys/policy/other '{"policy": "path \"secret/vitastor/other*\" { capabilities = [\"read\"] }"}' || fail "policy other"
vault_api POST auth/cert/certs/other "{\"certificate\": $(json_str "$P/other.crt"), \"token_policies\": \"other\"}" || fail "cert other"
tromcho modify testimg3 --reader_group g >/dev/null && kv_put /config/user/other '{"groups": ["g"]}' || fail "reader"
expect_fail "image testimg3: Vault denied reading secret vitastor/testimg3 \(403" as other dd iimg=testimg3 of=/dev/null count=1
for k in missing short nothex equal nokey; do
  tromcho create -s 4M --enc_key "vault:vitastor/other-$k" --owner other "o-$k" >/dev/null || fail "create o-$k"
done
vault_api POST secret/vitastor/other-short "{\"key\": \"${KEY:0:64}\"}"
vault_api POST secret/vitastor/other-nothex "{\"key\": \"${KEY:0:126}zz\"}"
vault_api POST secret/vitastor/other-equal "{\"key\": \"${KEY:0:64}${KEY:0:64}\"}"
vault_api POST secret/vitastor/other-nokey "{\"value\": \"$KEY\"}"
expect_fail "image o-missing: Vault has no secret vitastor/other-missing" as other dd iimg=o-missing of=/dev/null count=1
expect_fail "image o-short: Vault secret vitastor/other-short: field key must be 128 hex digits \(it has 64" \
  as other dd iimg=o-short of=/dev/null count=1
expect_fail "image o-nothex: .*128 hex digits .*not all hex" as other dd iimg=o-nothex of=/dev/null count=1
expect_fail "image o-equal: .*two halves are equal" as other dd iimg=o-equal of=/dev/null count=1
expect_fail "image o-nokey: Vault secret vitastor/other-nokey has no field key" as other dd iimg=o-nokey of=/dev/null count=1
sed "s|\"vault_url\": \"$VAULT_URL\", ||" "$CONF" > "$TESTDIR/novault.conf"
TROMCHO_CONFIG=$TESTDIR/novault.conf expect_fail "image testimg3: its key is in Vault .*vault_url is not set" \
  as testimg3 dd iimg=testimg3 of=/dev/null count=1
expect_fail "image testimg3: TLS with Vault at .* failed \(vault_ca .*client_ca.crt" \
  as testimg3 --vault_ca "$P/client_ca.crt" dd iimg=testimg3 of=/dev/null count=1
echo "errors: login refused, 403, no secret, short/non-hex/equal halves/no field, no vault_url, untrusted server"

# --- one client's token over time (client-tool keyloop: one tc_client) ---
exp=$(head -c 16 "$TESTDIR/data" | xxd -p)
coproc LOOP { "$TOOL" --cert "$P/testimg3.crt" --pkey "$P/testimg3.key" keyloop testimg3 2>&1; }
cleanup_fn "kill $LOOP_PID 2>/dev/null"
ask () { echo "$1" >&"${LOOP[1]}"; read -r -t 30 line <&"${LOOP[0]}" || fail "keyloop: no answer to $1"; echo "$line"; }
logins () { vault_count "POST /v1/auth/cert/login 200 cn=testimg3"; }
l0=$(logins)
[ "$(ask open)" = "ok $exp" ] || fail "keyloop open"
[ "$(ask open)" = "ok $exp" ] || fail "keyloop second open"
[ "$(logins)" = $((l0 + 1)) ] || fail "the token is not cached: $(logins) logins after 2 opens (before: $l0)"
# revoked: every token of the stand-in, through the accessors as an operator would
for a in $(vault_api GET "auth/token/accessors?list=true" | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["data"]["keys"]))'); do
  vault_api POST auth/token/revoke-accessor "{\"accessor\": \"$a\"}" || fail "revoke"
done
[ "$(ask open)" = "ok $exp" ] || fail "open after the token was revoked"
[ "$(logins)" = $((l0 + 2)) ] || fail "no new login after revocation"
vault_count "GET /v1/secret/vitastor/testimg3 403 cn=testimg3" | grep -qx 1 || fail "the revoked token was not tried first"
echo "token: cached across opens; revoked -> 403 -> one new login"
# the secret changed while the image is open: the open handle keeps its key,
# a new open takes the new one (and so reads other plaintext)
vault_api POST secret/vitastor/testimg3 "{\"key\": \"$(openssl rand -hex 64)\"}" || fail "change secret"
[ "$(ask read)" = "ok $exp" ] || fail "the open handle lost its key when the secret changed"
r=$(ask open); case $r in "ok $exp") fail "a new open did not take the changed key";; ok*) ;; *) fail "open: $r";; esac
vault_api POST secret/vitastor/testimg3 "{\"key\": \"$KEY\"}" || fail "restore secret"
[ "$(ask open)" = "ok $exp" ] || fail "open with the restored key"
echo "secret changed: open handles keep their key, new opens take the new one"
# Vault stopped: open handles go on, opens fail naming the cause; back again
stop_vault
[ "$(ask read)" = "ok $exp" ] || fail "the open handle failed while Vault is down"
r=$(ask open); echo "$r" | grep -q "^err image testimg3: Vault at .* unreachable" || fail "open with Vault down: $r"
vault_spawn
[ "$(ask open)" = "ok $exp" ] || fail "open after Vault came back"
[ "$(logins)" = $((l0 + 2)) ] || fail "the token did not survive Vault's restart"
echo "Vault stopped: open handles go on, opens say unreachable; restarted: the cached token works"
# renewal: an 8 s token is renewed after 2/3 of it (5.33 s), and replaced
# once expired (at 7.2 s: the client keeps a margin of a tenth)
vault_api POST auth/cert/certs/testimg3 "{\"certificate\": $(json_str "$P/testimg3.crt"), \"token_ttl\": \"8s\", \"token_policies\": \"testimg3\"}" ||
  fail "short ttl"
for a in $(vault_api GET "auth/token/accessors?list=true" | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["data"]["keys"]))'); do
  vault_api POST auth/token/revoke-accessor "{\"accessor\": \"$a\"}" || fail "revoke"
done
[ "$(ask open)" = "ok $exp" ] || fail "open (8 s token)"
l1=$(logins)
sleep 5.8
[ "$(ask open)" = "ok $exp" ] || fail "open at 5.8 s"
[ "$(vault_count "POST /v1/auth/token/renew-self 200 cn=testimg3")" = 1 ] || fail "the token was not renewed at 2/3 of its TTL"
[ "$(logins)" = "$l1" ] || fail "a login instead of a renewal"
sleep 8.2
[ "$(ask open)" = "ok $exp" ] || fail "open after expiry"
[ "$(logins)" = $((l1 + 1)) ] || fail "no new login after the token expired"
echo "token: renewed at 2/3 of its TTL, a new login once expired"
# certificate rotation: a new certificate on disk is used at the next login
mv "$P/testimg3.crt" "$P/testimg3.old.crt"; mv "$P/testimg3.key" "$P/testimg3.old.key"
tromcho make-certs user testimg3 --dir "$P" >/dev/null || fail "new testimg3 certificate"
vault_api POST auth/cert/certs/testimg3 "{\"certificate\": $(json_str "$P/testimg3.crt"), \"token_ttl\": \"24h\", \"token_policies\": \"testimg3\"}" ||
  fail "new cert entry"
for a in $(vault_api GET "auth/token/accessors?list=true" | python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["data"]["keys"]))'); do
  vault_api POST auth/token/revoke-accessor "{\"accessor\": \"$a\"}" || fail "revoke"
done
[ "$(ask open)" = "ok $exp" ] || fail "open with the rotated certificate (re-read from disk at login)"
# Online re-key to another Vault secret, by the owner (use_perms, no admin),
# while the key loop's handle is open: it follows to the new layer.
KEY2=$(openssl rand -hex 64)
vault_api POST secret/vitastor/testimg3-new "{\"key\": \"$KEY2\"}" || fail "second secret"
vault_api PUT sys/policy/testimg3 '{"policy": "path \"secret/vitastor/testimg3*\" { capabilities = [\"read\"] }"}' ||
  fail "policy for both secrets"
as testimg3 modify testimg3 --rekey vault:vitastor/testimg3-new >/dev/null || fail "re-key testimg3 to another Vault secret"
as testimg3 info testimg3 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert "rekey" not in d, d' || fail "re-key not finished"
[ "$(ask read)" = "ok $exp" ] || fail "the open handle after the re-key"
as testimg3 dd iimg=testimg3 of="$TESTDIR/back" bs=1M count=4 2>/dev/null || fail "dd back after the re-key"
cmp "$TESTDIR/data" "$TESTDIR/back" || fail "testimg3 reads back wrong after the re-key"
"$TOOL" rawread testimg3 8192 4096 > "$TESTDIR/ct" || fail "raw read after the re-key"
python3 - "$KEY2" 2 "$TESTDIR/ct" "$TESTDIR/pt" <<'PY' || fail "decrypt"
import sys
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
key, sector = bytes.fromhex(sys.argv[1]), int(sys.argv[2])
d = Cipher(algorithms.AES(key), modes.XTS(sector.to_bytes(16, "little"))).decryptor()
open(sys.argv[4], "wb").write(d.update(open(sys.argv[3], "rb").read()) + d.finalize())
PY
cmp "$TESTDIR/pt" <(dd if="$TESTDIR/data" bs=4096 skip=2 count=1 2>/dev/null) || fail "stored sector is not XTS under the new secret"
dump=$(curl -sf -X POST "$KV_URL/v3/kv/range" -d "{\"key\": \"AA==\", \"range_end\": \"AA==\"}" |
  python3 -c 'import base64,json,sys; [print(base64.b64decode(k.get("value", "")).decode(errors="replace")) for k in json.load(sys.stdin).get("kvs", [])]')
echo "$dump" | grep -qF '"vault:vitastor\/testimg3"' && fail "a record still names the old secret"
echo "re-key to another Vault secret: by the owner, the open handle follows, data under the new key"
exec {LOOP[1]}>&-
echo "test-vault: ok"
