#!/usr/bin/env bash
# AES-256-XTS and AES-256-GCM of tromcho (crypto-tool, GnuTLS underneath)
# byte for byte against OpenSSL's libcrypto (openssl-tool), both directions,
# on random data, keys, nonces and sector numbers (some past 2^32).
# `openssl enc` cannot be used: OpenSSL 3.0 refuses XTS in enc and enc has
# no GCM, so openssl-tool calls EVP directly (see tests/openssl-tool.c).
. "${top_srcdir:-..}/tests/functions.sh"
tools="${top_builddir:-..}/tests"
[ -x "$tools/openssl-tool" ] || skip not-built "openssl-tool not built (install libssl-dev and re-run configure)"
[ -x "$tools/crypto-tool" ] || fail "crypto-tool not built"
requires od head cmp
ct="$tools/crypto-tool"
ossl="$tools/openssl-tool"
cd "$TESTDIR"

hexrand () { od -An -tx1 -v -N"$1" /dev/urandom | tr -d ' \n'; }
# A random unsigned 64-bit number (or below 2^bits).
rand64 () { od -An -tu8 -N8 /dev/urandom | tr -d ' '; }
rand32 () { od -An -tu4 -N4 /dev/urandom | tr -d ' '; }

# Sanity of the reference itself: GCM spec test cases 16, 17 (64-bit IV)
# and 18 (480-bit IV), which tromcho's 96-bit-nonce API cannot take.
printf '%s' d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39 |
  sed 's/../\\x&/g' | xargs -0 printf '%b' > tc-pt
K=feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308
A=feedfacedeadbeeffeedfacedeadbeefabaddad2
check_ref () {
  local iv=$1 want=$2 got
  got=$("$ossl" gcm-seal $K "$iv" $A < tc-pt | od -An -tx1 -v | tr -d ' \n')
  [ "$got" = "$want" ] || fail "openssl-tool does not reproduce the GCM spec case for IV $iv: $got"
}
check_ref cafebabefacedbaddecaf888 522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f66276fc6ece0f4e1768cddf8853bb2d551b
check_ref cafebabefacedbad c3762df1ca787d32ae47c13bf19844cbaf1ae14d0b976afac52ff7d79bba9de0feb582d33934a4f0954cc2363bc73f7862ac430e64abe499f47c9b1f3a337dbf46a792c45e454913fe2ea8f2
check_ref 9313225df88406e555909c5aff5269aa6a7a9538534f7da1e4c303d2a318a728c3c0c95156809539fcf0e2429a6b525416aedbf5a0de6a57a637b39b 5a8def2f0c9e53f1f75d7853659e2a20eeb2b22aafde6419a058ab4f6f746bf40fc0c3b780f244452da3ebf1c5d82cdea2418997200ef82e44ae7e3fa44a8266ee1c8eb0c8b5d4cf5ae9f19a
# And the same case 16 through tromcho.
got=$("$ct" gcm-seal $K cafebabefacedbaddecaf888 $A < tc-pt | od -An -tx1 -v | tr -d ' \n')
[ "$got" = 522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f66276fc6ece0f4e1768cddf8853bb2d551b ] ||
  fail "crypto-tool gcm-seal: GCM spec case 16 wrong: $got"

# --- XTS ---------------------------------------------------------------
head -c $((9 * 4096)) /dev/urandom > data
sectors="0 1 4294967295 4294967296 $(rand32) $(rand64) $(( $(rand32) + 4294967296 )) 18446744073709551606"
xts_cases=0
for s in $sectors; do
  key=$(hexrand 64)
  "$ct" xts-enc "$key" "$s" < data > ours || fail "crypto-tool xts-enc sector $s"
  "$ossl" xts-enc "$key" "$s" < data > theirs || fail "openssl-tool xts-enc sector $s"
  cmp -s ours theirs || fail "XTS encrypt differs from OpenSSL at first sector $s: $(cmp ours theirs)"
  cmp -s ours data && fail "XTS encrypt did nothing"
  # Decrypt the other side's output, both ways.
  "$ct" xts-dec "$key" "$s" < theirs > back1 || fail "crypto-tool xts-dec sector $s"
  "$ossl" xts-dec "$key" "$s" < ours > back2 || fail "openssl-tool xts-dec sector $s"
  cmp -s back1 data || fail "crypto-tool xts-dec of OpenSSL's ciphertext differs at sector $s"
  cmp -s back2 data || fail "OpenSSL's xts-dec of our ciphertext differs at sector $s"
  # One sector alone at its index gives the same bytes (shell arithmetic is
  # signed 64-bit: only for sector numbers below 10^18).
  if [ ${#s} -lt 19 ]; then
    dd if=data of=one bs=4096 skip=2 count=1 status=none
    "$ct" xts-enc "$key" "$(( s + 2 ))" < one > one.enc || fail "crypto-tool xts-enc sector $((s + 2))"
    dd if=ours bs=4096 skip=2 count=1 status=none | cmp -s - one.enc || fail "sector $((s + 2)) alone differs"
  fi
  xts_cases=$((xts_cases + 1))
done

# Refusals, each naming what is wrong.
k=$(hexrand 32)
expect_fail "halves" "$ct" xts-enc "$k$k" 0 < data
expect_fail "4096" sh -c "head -c 5000 data | '$ct' xts-enc $(hexrand 64) 0"
expect_fail "128 hex digits" "$ct" xts-enc abcd 0 < data
expect_fail "not hex" "$ct" xts-enc "zz$(hexrand 63)" 0 < data
expect_fail "sector number" "$ct" xts-enc "$(hexrand 64)" -1 < data
expect_fail "sector number" "$ct" xts-enc "$(hexrand 64)" 18446744073709551616 < data

# --- GCM ---------------------------------------------------------------
gcm_cases=0
for len in 0 1 15 16 17 64 4096 65549; do
  for aadlen in 0 13 64; do
    head -c $len /dev/urandom > pt
    key=$(hexrand 32); nonce=$(hexrand 12); aad=$(hexrand $aadlen)
    "$ct" gcm-seal "$key" "$nonce" "$aad" < pt > ours || fail "crypto-tool gcm-seal $len/$aadlen"
    "$ossl" gcm-seal "$key" "$nonce" "$aad" < pt > theirs || fail "openssl-tool gcm-seal $len/$aadlen"
    cmp -s ours theirs || fail "GCM seal of $len bytes with $aadlen bytes of AAD differs from OpenSSL"
    "$ct" gcm-open "$key" "$nonce" "$aad" < theirs > back || fail "crypto-tool gcm-open of OpenSSL's record"
    cmp -s back pt || fail "GCM open differs ($len/$aadlen)"
    "$ossl" gcm-open "$key" "$nonce" "$aad" < ours > back || fail "OpenSSL refuses our record ($len/$aadlen)"
    cmp -s back pt || fail "OpenSSL's open of our record differs ($len/$aadlen)"
    gcm_cases=$((gcm_cases + 1))
  done
done
# Tampering: the last byte (tag), the first byte (ciphertext), the AAD.
head -c 1000 /dev/urandom > pt
key=$(hexrand 32); nonce=$(hexrand 12); aad=$(hexrand 20)
"$ct" gcm-seal "$key" "$nonce" "$aad" < pt > rec
flip () { # flip a bit of byte $1 of rec into bad
  cp rec bad
  local b; b=$(od -An -tu1 -j"$1" -N1 rec | tr -d ' ')
  printf "$(printf '\\%03o' $(( b ^ 1 )))" | dd of=bad bs=1 seek="$1" conv=notrunc status=none
}
flip 1015; expect_fail "tag mismatch" "$ct" gcm-open "$key" "$nonce" "$aad" < bad
flip 0;    expect_fail "tag mismatch" "$ct" gcm-open "$key" "$nonce" "$aad" < bad
expect_fail "tag mismatch" "$ct" gcm-open "$key" "$nonce" "$(hexrand 20)" < rec
expect_fail "tag mismatch" "$ct" gcm-open "$key" "$nonce" "" < rec
expect_fail "24 hex digits" "$ct" gcm-seal "$key" cafebabefacedbad "" < pt
"$ct" gcm-open "$key" "$nonce" "$aad" < rec | cmp -s - pt || fail "the untouched record does not open"

echo "XTS: $xts_cases sector sets, GCM: $gcm_cases records: identical to OpenSSL $(openssl version 2>/dev/null | cut -d' ' -f2)"
