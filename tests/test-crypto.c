/* Crypto core against published vectors and against itself:
 *   IEEE 1619-2007 XTS-AES-256 vectors 10-14 (512-byte data units)
 *   GCM specification (McGrew & Viega, used by NIST SP 800-38D) test cases
 *     13-16, the AES-256 cases with a 96-bit IV; 17 and 18 use 64- and
 *     480-bit IVs, which tc_gcm (96-bit nonces only) cannot take; they
 *     validate the independent implementation in test-crypto-openssl.sh
 *   RFC 7748 section 5.2 (two single vectors, 1 and 1000 iterations) and
 *     section 6.1 (Diffie-Hellman), low-order points refused
 *   RFC 5869 test cases 1-3, RFC 4231 test cases 1-7, FIPS 180 SHA-256
 *   XXH3-64 of every build (SSE2, AVX2, AVX-512) against Debian's libxxhash
 *   XTS multi-sector == per-sector, in place == out of place, refusals,
 *   tc_memeq_ct, tc_wipe, and a clean upper vector state after hashing. */
#include <config.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>   /* Debian's libxxhash: the reference, linked into this test only */
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include "crypto.h"
#include "error.h"
#include "tap.h"
#include "testlib.h"

/* The per-build entry points behind tc_xxh3_64_seed (common/xxh3_impl.c). */
uint64_t tc_xxh3_64_seed_sse2(const void *data, size_t len, uint64_t seed);
uint64_t tc_xxh3_64_seed_avx2(const void *data, size_t len, uint64_t seed);
uint64_t tc_xxh3_64_seed_avx512(const void *data, size_t len, uint64_t seed);

/* Test vectors: bad hex in one is a bug in this file. */
#define tv_unhex(hex, len) tl_unhex("test-crypto", "test vector", hex, SIZE_MAX, len)

/* Compare got with the hex of the expected bytes. */
static int
eq_hex(const void *got, const char *want_hex, size_t len)
{
  size_t n;
  uint8_t *want = tv_unhex(want_hex, &n);
  int ok = n == len && memcmp(got, want, len) == 0;
  free(want);
  return ok;
}

/* --- IEEE 1619-2007 XTS-AES-256, vectors 10-14 --------------------------- */

static const char xts_key_hex[] =
  "2718281828459045235360287471352662497757247093699959574966967627"
  "3141592653589793238462643383279502884197169399375105820974944592";

static const struct {
  int vector;
  uint64_t seq;     /* data unit sequence number */
  const char *ct;
} xts_vectors[] = {
  { 10, 0xff,
    "1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b"
    "5d31e276f8fe4a8d66b317f9ac683f44680a86ac35adfc3345befecb4bb188fd"
    "5776926c49a3095eb108fd1098baec70aaa66999a72a82f27d848b21d4a741b0"
    "c5cd4d5fff9dac89aeba122961d03a757123e9870f8acf1000020887891429ca"
    "2a3e7a7d7df7b10355165c8b9a6d0a7de8b062c4500dc4cd120c0f7418dae3d0"
    "b5781c34803fa75421c790dfe1de1834f280d7667b327f6c8cd7557e12ac3a0f"
    "93ec05c52e0493ef31a12d3d9260f79a289d6a379bc70c50841473d1a8cc81ec"
    "583e9645e07b8d9670655ba5bbcfecc6dc3966380ad8fecb17b6ba02469a020a"
    "84e18e8f84252070c13e9f1f289be54fbc481457778f616015e1327a02b140f1"
    "505eb309326d68378f8374595c849d84f4c333ec4423885143cb47bd71c5edae"
    "9be69a2ffeceb1bec9de244fbe15992b11b77c040f12bd8f6a975a44a0f90c29"
    "a9abc3d4d893927284c58754cce294529f8614dcd2aba991925fedc4ae74ffac"
    "6e333b93eb4aff0479da9a410e4450e0dd7ae4c6e2910900575da401fc07059f"
    "645e8b7e9bfdef33943054ff84011493c27b3429eaedb4ed5376441a77ed4385"
    "1ad77f16f541dfd269d50d6a5f14fb0aab1cbb4c1550be97f7ab4066193c4caa"
    "773dad38014bd2092fa755c824bb5e54c4f36ffda9fcea70b9c6e693e148c151" },
  { 11, 0xffff,
    "77a31251618a15e6b92d1d66dffe7b50b50bad552305ba0217a610688eff7e11"
    "e1d0225438e093242d6db274fde801d4cae06f2092c728b2478559df58e837c2"
    "469ee4a4fa794e4bbc7f39bc026e3cb72c33b0888f25b4acf56a2a9804f1ce6d"
    "3d6e1dc6ca181d4b546179d55544aa7760c40d06741539c7e3cd9d2f6650b201"
    "3fd0eeb8c2b8e3d8d240ccae2d4c98320a7442e1c8d75a42d6e6cfa4c2eca179"
    "8d158c7aecdf82490f24bb9b38e108bcda12c3faf9a21141c3613b58367f922a"
    "aa26cd22f23d708dae699ad7cb40a8ad0b6e2784973dcb605684c08b8d6998c6"
    "9aac049921871ebb65301a4619ca80ecb485a31d744223ce8ddc2394828d6a80"
    "470c092f5ba413c3378fa6054255c6f9df4495862bbb3287681f931b687c888a"
    "bf844dfc8fc28331e579928cd12bd2390ae123cf03818d14dedde5c0c24c8ab0"
    "18bfca75ca096f2d531f3d1619e785f1ada437cab92e980558b3dce1474afb75"
    "bfedbf8ff54cb2618e0244c9ac0d3c66fb51598cd2db11f9be39791abe447c63"
    "094f7c453b7ff87cb5bb36b7c79efb0872d17058b83b15ab0866ad8a58656c5a"
    "7e20dbdf308b2461d97c0ec0024a2715055249cf3b478ddd4740de654f75ca68"
    "6e0d7345c69ed50cdc2a8b332b1f8824108ac937eb050585608ee734097fc090"
    "54fbff89eeaeea791f4a7ab1f9868294a4f9e27b42af8100cb9d59cef9645803" },
  { 12, 0xffffff,
    "e387aaa58ba483afa7e8eb469778317ecf4cf573aa9d4eac23f2cdf914e4e200"
    "a8b490e42ee646802dc6ee2b471b278195d60918ececb44bf79966f83faba049"
    "9298ebc699c0c8634715a320bb4f075d622e74c8c932004f25b41e361025b5a8"
    "7815391f6108fc4afa6a05d9303c6ba68a128a55705d415985832fdeaae6c8e1"
    "9110e84d1b1f199a2692119edc96132658f09da7c623efcec712537a3d94c0bf"
    "5d7e352ec94ae5797fdb377dc1551150721adf15bd26a8efc2fcaad56881fa9e"
    "62462c28f30ae1ceaca93c345cf243b73f542e2074a705bd2643bb9f7cc79bb6"
    "e7091ea6e232df0f9ad0d6cf502327876d82207abf2115cdacf6d5a48f6c1879"
    "a65b115f0f8b3cb3c59d15dd8c769bc014795a1837f3901b5845eb491adfefe0"
    "97b1fa30a12fc1f65ba22905031539971a10f2f36c321bb51331cdefb39e3964"
    "c7ef079994f5b69b2edd83a71ef549971ee93f44eac3938fcdd61d01fa71799d"
    "a3a8091c4c48aa9ed263ff0749df95d44fef6a0bb578ec69456aa5408ae32c7a"
    "f08ad7ba8921287e3bbee31b767be06a0e705c864a769137df28292283ea81a2"
    "480241b44d9921cdbec1bc28dc1fda114bd8e5217ac9d8ebafa720e9da4f9ace"
    "231cc949e5b96fe76ffc21063fddc83a6b8679c00d35e09576a875305bed5f36"
    "ed242c8900dd1fa965bc950dfce09b132263a1eef52dd6888c309f5a7d712826" },
  { 13, 0xffffffff,
    "bf53d2dade78e822a4d949a9bc6766b01b06a8ef70d26748c6a7fc36d80ae4c5"
    "520f7c4ab0ac8544424fa405162fef5a6b7f229498063618d39f0003cb5fb8d1"
    "c86b643497da1ff945c8d3bedeca4f479702a7a735f043ddb1d6aaade3c4a0ac"
    "7ca7f3fa5279bef56f82cd7a2f38672e824814e10700300a055e1630b8f1cb0e"
    "919f5e942010a416e2bf48cb46993d3cb6a51c19bacf864785a00bc2ecff15d3"
    "50875b246ed53e68be6f55bd7e05cfc2b2ed6432198a6444b6d8c247fab941f5"
    "69768b5c429366f1d3f00f0345b96123d56204c01c63b22ce78baf116e525ed9"
    "0fdea39fa469494d3866c31e05f295ff21fea8d4e6e13d67e47ce722e9698a1c"
    "1048d68ebcde76b86fcf976eab8aa9790268b7068e017a8b9b749409514f1053"
    "027fd16c3786ea1bac5f15cb79711ee2abe82f5cf8b13ae73030ef5b9e4457e7"
    "5d1304f988d62dd6fc4b94ed38ba831da4b7634971b6cd8ec325d9c61c00f1df"
    "73627ed3745a5e8489f3a95c69639c32cd6e1d537a85f75cc844726e8a72fc00"
    "77ad22000f1d5078f6b866318c668f1ad03d5a5fced5219f2eabbd0aa5c0f460"
    "d183f04404a0d6f469558e81fab24a167905ab4c7878502ad3e38fdbe62a4155"
    "6cec37325759533ce8f25f367c87bb5578d667ae93f9e2fd99bcbc5f2fbba88c"
    "f6516139420fcff3b7361d86322c4bd84c82f335abb152c4a93411373aaa8220" },
  { 14, 0xffffffffff,
    "64497e5a831e4a932c09be3e5393376daa599548b816031d224bbf50a818ed23"
    "50eae7e96087c8a0db51ad290bd00c1ac1620857635bf246c176ab463be30b80"
    "8da548081ac847b158e1264be25bb0910bbc92647108089415d45fab1b3d2604"
    "e8a8eff1ae4020cfa39936b66827b23f371b92200be90251e6d73c5f86de5fd4"
    "a950781933d79a28272b782a2ec313efdfcc0628f43d744c2dc2ff3dcb66999b"
    "50c7ca895b0c64791eeaa5f29499fb1c026f84ce5b5c72ba1083cddb5ce45434"
    "631665c333b60b11593fb253c5179a2c8db813782a004856a1653011e93fb6d8"
    "76c18366dd8683f53412c0c180f9c848592d593f8609ca736317d356e13e2bff"
    "3a9f59cd9aeb19cd482593d8c46128bb32423b37a9adfb482b99453fbe25a41b"
    "f6feb4aa0bef5ed24bf73c762978025482c13115e4015aac992e5613a3b5c2f6"
    "85b84795cb6e9b2656d8c88157e52c42f978d8634c43d06fea928f2822e465aa"
    "6576e9bf419384506cc3ce3c54ac1a6f67dc66f3b30191e698380bc999b05abc"
    "e19dc0c6dcc2dd001ec535ba18deb2df1a101023108318c75dc98611a09dc48a"
    "0acdec676fabdf222f07e026f059b672b56e5cbc8e1d21bbd867dd9272120546"
    "81d70ea737134cdfce93b6f82ae22423274e58a0821cc5502e2d0ab4585e94de"
    "6975be5e0b4efce51cd3e70c25a1fbbbd609d273ad5b0d59631c531f6a0a57b9" },
};

static void
test_xts_vectors(enum tc_xts_impl impl)
{
  uint8_t *key = tv_unhex(xts_key_hex, NULL);
  struct tc_xts *x;
  CHECK(tc_xts_new_impl(&x, key, impl) == 0, "tc_xts_new: %s", tc_last_error());
  free(key);
  uint8_t pt[512], out[512], back[512];
  for (int i = 0; i < 512; i++)
    pt[i] = (uint8_t) i;   /* 00..ff twice, as in the standard */
  for (size_t v = 0; v < sizeof xts_vectors / sizeof xts_vectors[0]; v++) {
    uint8_t tweak[16] = { 0 };
    for (int i = 0; i < 8; i++)
      tweak[i] = (uint8_t) (xts_vectors[v].seq >> (8 * i));   /* 128-bit little-endian */
    int vec = xts_vectors[v].vector;
    CHECK(tc_xts_encrypt_unit(x, tweak, pt, out, sizeof pt) == 0, "XTS vector %d encrypt: %s", vec, tc_last_error());
    CHECK(eq_hex(out, xts_vectors[v].ct, sizeof out), "XTS vector %d: wrong ciphertext", vec);
    CHECK(tc_xts_decrypt_unit(x, tweak, out, back, sizeof out) == 0, "XTS vector %d decrypt: %s", vec, tc_last_error());
    CHECK(memcmp(back, pt, sizeof pt) == 0, "XTS vector %d: decrypt does not give the plaintext", vec);
    /* In place, both directions. */
    memcpy(back, pt, sizeof pt);
    CHECK(tc_xts_encrypt_unit(x, tweak, back, back, sizeof back) == 0 && memcmp(back, out, sizeof out) == 0,
          "XTS vector %d: in-place encrypt differs", vec);
    CHECK(tc_xts_decrypt_unit(x, tweak, back, back, sizeof back) == 0 && memcmp(back, pt, sizeof pt) == 0,
          "XTS vector %d: in-place decrypt differs", vec);
  }
  tc_xts_free(x);
}

/* Multi-sector calls equal per-sector calls with the LE sector tweak,
 * including across the 2^32 sector boundary; in place equals out of place. */
static void
test_xts_sectors(enum tc_xts_impl impl)
{
  enum { N = 8 };
  uint8_t key[64];
  CHECK(tc_random(key, sizeof key) == 0, "tc_random: %s", tc_last_error());
  struct tc_xts *x;
  CHECK(tc_xts_new_impl(&x, key, impl) == 0, "tc_xts_new: %s", tc_last_error());
  uint8_t *pt = malloc(N * TC_XTS_SECTOR), *all = malloc(N * TC_XTS_SECTOR),
          *one = malloc(N * TC_XTS_SECTOR), *inplace = malloc(N * TC_XTS_SECTOR);
  CHECK(pt && all && one && inplace, "out of memory");
  if (!pt || !all || !one || !inplace)
    goto out;
  CHECK(tc_random(pt, N * TC_XTS_SECTOR) == 0, "tc_random: %s", tc_last_error());
  static const uint64_t firsts[] = { 0, 1, 0xfffffffcULL, 0x123456789aULL, UINT64_MAX - N + 1 };
  for (size_t f = 0; f < sizeof firsts / sizeof firsts[0]; f++) {
    uint64_t first = firsts[f];
    CHECK(tc_xts_encrypt(x, first, pt, all, N * TC_XTS_SECTOR) == 0, "tc_xts_encrypt: %s", tc_last_error());
    for (int s = 0; s < N; s++) {
      CHECK(tc_xts_encrypt(x, first + s, pt + s * TC_XTS_SECTOR, one + s * TC_XTS_SECTOR, TC_XTS_SECTOR) == 0,
            "tc_xts_encrypt one sector: %s", tc_last_error());
      uint8_t tweak[16] = { 0 }, unit[TC_XTS_SECTOR];
      for (int i = 0; i < 8; i++)
        tweak[i] = (uint8_t) ((first + s) >> (8 * i));
      CHECK(tc_xts_encrypt_unit(x, tweak, pt + s * TC_XTS_SECTOR, unit, sizeof unit) == 0 &&
            memcmp(unit, all + s * TC_XTS_SECTOR, sizeof unit) == 0,
            "sector %llu: tc_xts_encrypt differs from one unit with the LE tweak",
            (unsigned long long) (first + s));
    }
    CHECK(memcmp(all, one, N * TC_XTS_SECTOR) == 0, "first sector %llu: %d sectors at once differ from one by one",
          (unsigned long long) first, N);
    memcpy(inplace, pt, N * TC_XTS_SECTOR);
    CHECK(tc_xts_encrypt(x, first, inplace, inplace, N * TC_XTS_SECTOR) == 0 &&
          memcmp(inplace, all, N * TC_XTS_SECTOR) == 0, "first sector %llu: in place differs", (unsigned long long) first);
    CHECK(tc_xts_decrypt(x, first, inplace, inplace, N * TC_XTS_SECTOR) == 0 &&
          memcmp(inplace, pt, N * TC_XTS_SECTOR) == 0, "first sector %llu: in-place decrypt", (unsigned long long) first);
    CHECK(tc_xts_decrypt(x, first, all, one, N * TC_XTS_SECTOR) == 0 &&
          memcmp(one, pt, N * TC_XTS_SECTOR) == 0, "first sector %llu: decrypt", (unsigned long long) first);
  }
  /* Neighbouring sectors of equal plaintext differ (the tweak is used). */
  memset(pt, 0, 2 * TC_XTS_SECTOR);
  CHECK(tc_xts_encrypt(x, 7, pt, all, 2 * TC_XTS_SECTOR) == 0 &&
        memcmp(all, all + TC_XTS_SECTOR, TC_XTS_SECTOR) != 0, "equal sectors encrypt equally");

  /* Refusals: partial sectors, bad unit lengths. */
  CHECK(tc_xts_encrypt(x, 0, pt, all, TC_XTS_SECTOR + 512) < 0 && errno == EINVAL, "partial sector accepted");
  CHECK(strstr(tc_last_error(), "4096") != NULL, "message: %s", tc_last_error());
  /* A range that would wrap past sector 2^64 - 1 to sector 0 (same tweak). */
  CHECK(tc_xts_encrypt(x, UINT64_MAX, pt, all, 2 * TC_XTS_SECTOR) < 0 && errno == EINVAL,
        "a sector range wrapping past 2^64 accepted");
  CHECK(tc_xts_decrypt(x, UINT64_MAX - 1, pt, all, 3 * TC_XTS_SECTOR) < 0 && errno == EINVAL,
        "a sector range wrapping past 2^64 accepted (decrypt)");
  CHECK(tc_xts_encrypt(x, UINT64_MAX, pt, all, TC_XTS_SECTOR) == 0, "the last sector refused: %s", tc_last_error());
  CHECK(tc_xts_encrypt(x, 5, pt, all, 0) == 0, "an empty range refused: %s", tc_last_error());
  uint8_t tweak[16] = { 0 };
  CHECK(tc_xts_encrypt_unit(x, tweak, pt, all, 15) < 0 && errno == EINVAL, "15-byte unit accepted");
  CHECK(tc_xts_decrypt_unit(x, tweak, pt, all, 40) < 0 && errno == EINVAL, "40-byte unit accepted");
  CHECK(tc_xts_encrypt_unit(x, tweak, pt, all, 0) < 0 && errno == EINVAL, "empty unit accepted");
out:
  free(pt);
  free(all);
  free(one);
  free(inplace);
  tc_xts_free(x);

  /* Equal halves are refused, distinct halves differing in one bit accepted. */
  memset(key, 0x42, sizeof key);
  x = NULL;
  CHECK(tc_xts_new(&x, key) < 0 && errno == EINVAL && x == NULL, "XTS key with equal halves accepted");
  CHECK(strstr(tc_last_error(), "halves") != NULL, "message: %s", tc_last_error());
  key[63] ^= 1;
  CHECK(tc_xts_new(&x, key) == 0, "XTS key with halves differing in one bit refused: %s", tc_last_error());
  tc_xts_free(x);
}

/* Our VAES XTS against GnuTLS's: random keys, tweaks, unit lengths (16 to
 * 8192 bytes, so the 256-byte loop and the block-at-a-time tail are both
 * crossed), in place and not. */
static void
test_xts_cross(void)
{
  enum { MAX = 8192 };
  uint8_t key[64], tweak[16];
  uint8_t *pt = malloc(MAX), *a = malloc(MAX), *b = malloc(MAX);
  CHECK(pt && a && b, "memory");
  for (int round = 0; round < 1000; round++) {
    struct tc_xts *g, *v;
    uint32_t r;
    CHECK(tc_random(key, sizeof key) == 0 && tc_random(tweak, sizeof tweak) == 0 && tc_random(&r, sizeof r) == 0,
          "tc_random: %s", tc_last_error());
    size_t len = 16 * (1 + (round < 40 ? (size_t) round : r % (MAX / 16)));
    CHECK(tc_random(pt, len) == 0, "tc_random");
    g = v = NULL;
    CHECK(tc_xts_new_impl(&g, key, TC_XTS_GNUTLS) == 0 && tc_xts_new_impl(&v, key, TC_XTS_VAES) == 0,
          "tc_xts_new_impl: %s", tc_last_error());
    if (!g || !v) {
      tc_xts_free(g);
      tc_xts_free(v);
      break;
    }
    CHECK(tc_xts_encrypt_unit(g, tweak, pt, a, len) == 0, "gnutls: %s", tc_last_error());
    memcpy(b, pt, len);
    CHECK(tc_xts_encrypt_unit(v, tweak, b, b, len) == 0 && memcmp(a, b, len) == 0,
          "round %d, %zu bytes: VAES XTS encrypts differently from GnuTLS", round, len);
    CHECK(tc_xts_decrypt_unit(v, tweak, a, b, len) == 0 && memcmp(b, pt, len) == 0,
          "round %d, %zu bytes: VAES XTS does not decrypt GnuTLS's", round, len);
    uint64_t sector = (uint64_t) r * 2654435761u;
    size_t n = len / TC_XTS_SECTOR * TC_XTS_SECTOR;
    if (n) {
      CHECK(tc_xts_decrypt(g, sector, pt, a, n) == 0 && tc_xts_decrypt(v, sector, pt, b, n) == 0 && memcmp(a, b, n) == 0,
            "round %d: VAES XTS decrypts sectors differently from GnuTLS", round);
    }
    tc_xts_free(g);
    tc_xts_free(v);
  }
  free(pt); free(a); free(b);
}

/* --- AES-256-GCM: GCM spec test cases 13-16 ------------------------------ */

static const struct {
  int tc;
  const char *key, *iv, *pt, *aad, *ct, *tag;
} gcm_vectors[] = {
  { 13, "0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000",
    "", "", "", "530f8afbc74536b9a963b4f1c4cb738b" },
  { 14, "0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000",
    "00000000000000000000000000000000", "", "cea7403d4d606b6e074ec5d3baf39d18",
    "d0d1c8a799996bf0265b98b5d48ab919" },
  { 15, "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255", "",
    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
    "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
    "b094dac5d93471bdec1a502270e3cc6c" },
  { 16, "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
    "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
    "feedfacedeadbeeffeedfacedeadbeefabaddad2",
    "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
    "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
    "76fc6ece0f4e1768cddf8853bb2d551b" },
};

/* Split buf into up to 3 iovecs at the given cut points (clamped). */
static int
split(struct iovec *iov, uint8_t *buf, size_t len, size_t cut1, size_t cut2)
{
  if (cut1 > len) cut1 = len;
  if (cut2 > len) cut2 = len;
  if (cut2 < cut1) cut2 = cut1;
  iov[0] = (struct iovec) { buf, cut1 };
  iov[1] = (struct iovec) { buf + cut1, cut2 - cut1 };
  iov[2] = (struct iovec) { buf + cut2, len - cut2 };
  return 3;
}

static void
test_gcm_vectors(enum tc_gcm_impl impl)
{
  for (size_t v = 0; v < sizeof gcm_vectors / sizeof gcm_vectors[0]; v++) {
    int tc = gcm_vectors[v].tc;
    size_t klen, ivlen, ptlen, aadlen;
    uint8_t *key = tv_unhex(gcm_vectors[v].key, &klen), *iv = tv_unhex(gcm_vectors[v].iv, &ivlen),
            *pt = tv_unhex(gcm_vectors[v].pt, &ptlen), *aad = tv_unhex(gcm_vectors[v].aad, &aadlen);
    uint8_t *buf = malloc(ptlen + 1);
    struct tc_gcm *g;
    CHECK(klen == 32 && ivlen == 12 && buf, "test case %d data", tc);
    CHECK(tc_gcm_new_impl(&g, key, impl) == 0, "tc_gcm_new_impl(%d): %s", (int) impl, tc_last_error());
    CHECK(impl == TC_GCM_AUTO || tc_gcm_impl_of(g) == impl, "tc_gcm_new_impl(%d) made a context of implementation %d", (int) impl,
          (int) tc_gcm_impl_of(g));

    /* One iovec each; then header and payload as separate iovecs, cut at
     * block and non-block boundaries, with the AAD split too. */
    static const size_t cuts[][2] = { { SIZE_MAX, SIZE_MAX }, { 16, 16 }, { 7, 39 }, { 0, 33 } };
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
      struct iovec data[3], ad[3];
      uint8_t tag[16];
      memcpy(buf, pt, ptlen);
      int nd = c == 0 ? (data[0] = (struct iovec) { buf, ptlen }, 1) : split(data, buf, ptlen, cuts[c][0], cuts[c][1]);
      int na = aadlen == 0 ? 0 : c == 0 ? (ad[0] = (struct iovec) { aad, aadlen }, 1) : split(ad, aad, aadlen, 4, 13);
      CHECK(tc_gcm_seal(g, iv, ad, na, data, nd, tag) == 0, "TC%d seal: %s", tc, tc_last_error());
      CHECK(eq_hex(buf, gcm_vectors[v].ct, ptlen), "TC%d (split %zu): wrong ciphertext", tc, c);
      CHECK(eq_hex(tag, gcm_vectors[v].tag, 16), "TC%d (split %zu): wrong tag", tc, c);
      CHECK(tc_gcm_open(g, iv, ad, na, data, nd, tag) == 0, "TC%d open: %s", tc, tc_last_error());
      CHECK(memcmp(buf, pt, ptlen) == 0, "TC%d (split %zu): open does not give the plaintext", tc, c);
    }

    /* The one-pass copy-and-seal (no AAD): the same ciphertext, the tag
     * after it, from one buffer or gathered from three; the input is left
     * untouched. */
    if (!aadlen) {
      uint8_t *out = malloc(ptlen + 16), *in = malloc(ptlen + 1);
      CHECK(out && in, "memory");
      memcpy(in, pt, ptlen);
      for (int c = 0; c < 2; c++) {
        struct iovec src[3];
        int ns = c == 0 ? (src[0] = (struct iovec) { in, ptlen }, 1) : split(src, in, ptlen, 7, 39);
        memset(out, 0xAA, ptlen + 16);
        CHECK(tc_gcm_seal_copy(g, iv, src, ns, out, ptlen) == 0, "TC%d seal_copy: %s", tc, tc_last_error());
        CHECK(eq_hex(out, gcm_vectors[v].ct, ptlen), "TC%d (seal_copy %d): wrong ciphertext", tc, c);
        CHECK(eq_hex(out + ptlen, gcm_vectors[v].tag, 16), "TC%d (seal_copy %d): wrong tag", tc, c);
        CHECK(memcmp(in, pt, ptlen) == 0, "TC%d (seal_copy %d): the input changed", tc, c);
      }
      /* Opening into a second buffer (a server keeping the sealed bytes):
       * the plaintext there, the sealed bytes untouched; a flipped bit
       * refused with out zeroed. */
      uint8_t *plain = malloc(ptlen + 1);
      CHECK(plain, "memory");
      memset(plain, 0xAA, ptlen);
      CHECK(tc_gcm_open_copy(g, iv, out, plain, ptlen, out + ptlen) == 0 && memcmp(plain, pt, ptlen) == 0 &&
            eq_hex(out, gcm_vectors[v].ct, ptlen), "TC%d open_copy: %s", tc, tc_last_error());
      if (ptlen) {
        out[0] ^= 4;
        errno = 0;
        CHECK(tc_gcm_open_copy(g, iv, out, plain, ptlen, out + ptlen) < 0 && errno == EBADMSG &&
              !memcmp(plain, (uint8_t[64]) { 0 }, ptlen < 64 ? ptlen : 64), "TC%d: open_copy of a flipped bit", tc);
        out[0] ^= 4;
      }
      free(plain);
      errno = 0;
      struct iovec shortin = { in, ptlen ? ptlen - 1 : 0 };
      CHECK(ptlen == 0 || (tc_gcm_seal_copy(g, iv, &shortin, 1, out, ptlen) < 0 && errno == EINVAL),
            "TC%d: seal_copy of fewer bytes than the record accepted", tc);
      free(out);
      free(in);
    }

    /* Tampering: a bad tag, a flipped ciphertext bit, a flipped AAD bit,
     * another nonce: each refused with EBADMSG, and the data buffer zeroed
     * (never left holding unauthenticated plaintext). */
    struct iovec d1 = { buf, ptlen }, a1 = { aad, aadlen };
    int na1 = aadlen ? 1 : 0;
    uint8_t tag[16], *sealed = malloc(ptlen + 1), *zero = calloc(1, ptlen + 1);
    memcpy(buf, pt, ptlen);
    CHECK(tc_gcm_seal(g, iv, &a1, na1, &d1, 1, tag) == 0, "TC%d seal: %s", tc, tc_last_error());
    memcpy(sealed, buf, ptlen);
    for (int bit = 0; bit < 128; bit += 37) {
      tag[bit / 8] ^= (uint8_t) (1 << (bit % 8));
      errno = 0;
      memcpy(buf, sealed, ptlen);
      CHECK(tc_gcm_open(g, iv, &a1, na1, &d1, 1, tag) < 0 && errno == EBADMSG,
            "TC%d: tag with bit %d flipped accepted", tc, bit);
      CHECK(memcmp(buf, zero, ptlen) == 0, "TC%d: a refused record left data in the buffer", tc);
      tag[bit / 8] ^= (uint8_t) (1 << (bit % 8));
    }
    CHECK(strstr(tc_last_error(), "tag") != NULL, "message: %s", tc_last_error());
    if (ptlen) {
      memcpy(buf, sealed, ptlen);
      buf[ptlen - 1] ^= 0x80;
      errno = 0;
      CHECK(tc_gcm_open(g, iv, &a1, na1, &d1, 1, tag) < 0 && errno == EBADMSG,
            "TC%d: flipped ciphertext accepted", tc);
      CHECK(memcmp(buf, zero, ptlen) == 0, "TC%d: a refused record left data in the buffer", tc);
    }
    if (aadlen) {
      memcpy(buf, sealed, ptlen);
      aad[0] ^= 1;
      errno = 0;
      CHECK(tc_gcm_open(g, iv, &a1, 1, &d1, 1, tag) < 0 && errno == EBADMSG, "TC%d: flipped AAD accepted", tc);
      aad[0] ^= 1;
      memcpy(buf, sealed, ptlen);
      errno = 0;
      CHECK(tc_gcm_open(g, iv, NULL, 0, &d1, 1, tag) < 0 && errno == EBADMSG, "TC%d: missing AAD accepted", tc);
    }
    memcpy(buf, sealed, ptlen);
    iv[11] ^= 1;
    errno = 0;
    CHECK(tc_gcm_open(g, iv, &a1, na1, &d1, 1, tag) < 0 && errno == EBADMSG, "TC%d: other nonce accepted", tc);
    iv[11] ^= 1;
    /* And the untouched record still opens. */
    memcpy(buf, sealed, ptlen);
    CHECK(tc_gcm_open(g, iv, &a1, na1, &d1, 1, tag) == 0 && memcmp(buf, pt, ptlen) == 0,
          "TC%d: the untouched record no longer opens: %s", tc, tc_last_error());

    /* Rekey to another key: the old tag no longer verifies; back again: it does. */
    uint8_t other[32];
    memcpy(other, key, 32);
    other[0] ^= 1;
    CHECK(tc_gcm_rekey(g, other) == 0, "tc_gcm_rekey: %s", tc_last_error());
    memcpy(buf, sealed, ptlen);
    CHECK(tc_gcm_open(g, iv, &a1, na1, &d1, 1, tag) < 0 && errno == EBADMSG, "TC%d: rekey had no effect", tc);
    memcpy(buf, sealed, ptlen);
    CHECK(tc_gcm_rekey(g, key) == 0 && tc_gcm_open(g, iv, &a1, na1, &d1, 1, tag) == 0 && memcmp(buf, pt, ptlen) == 0,
          "TC%d: rekey back: %s", tc, tc_last_error());
    tc_gcm_free(g);
    free(key); free(iv); free(pt); free(aad); free(buf); free(sealed); free(zero);
  }
}

/* An implementation against GnuTLS: random keys, nonces, lengths (0 to
 * 70000 bytes, so partial blocks and the wide loops (ipsec-mb's AVX-512,
 * our VAES code's 256 bytes) are all crossed), random cuts of header and payload, random AAD:
 * the same ciphertext and tag from each, and each opens what the other
 * sealed. */
static void
test_gcm_cross(enum tc_gcm_impl impl, const char *name, int rounds, size_t maxlen)
{
  struct tc_gcm *a, *b;
  uint8_t key[32], nonce[12], aad[64], tag_a[16], tag_b[16];
  size_t MAX = maxlen;
  uint8_t *pt = malloc(MAX), *x = malloc(MAX), *y = malloc(MAX + 16);
  CHECK(pt && x && y, "memory");
  for (int round = 0; round < rounds; round++) {
    CHECK(tc_random(key, sizeof key) == 0 && tc_random(nonce, sizeof nonce) == 0 && tc_random(aad, sizeof aad) == 0,
          "tc_random: %s", tc_last_error());
    CHECK(tc_gcm_new_impl(&a, key, TC_GCM_GNUTLS) == 0 && tc_gcm_new_impl(&b, key, impl) == 0,
          "tc_gcm_new_impl: %s", tc_last_error());
    uint32_t r[4];
    CHECK(tc_random(r, sizeof r) == 0, "tc_random");
    size_t len = round < 40 ? (size_t) round : r[0] % MAX, alen = r[1] % (sizeof aad + 1);
    CHECK(tc_random(pt, len) == 0, "tc_random");
    memcpy(x, pt, len);
    memcpy(y, pt, len);
    struct iovec dx[3], dy[3], ad[3];
    int nd = split(dx, x, len, r[2] % (len + 1), r[3] % (len + 1));
    split(dy, y, len, r[3] % (len + 1), r[2] % (len + 1));
    int na = split(ad, aad, alen, r[0] % (alen + 1), r[1] % (alen + 1));
    CHECK(tc_gcm_seal(a, nonce, ad, na, dx, nd, tag_a) == 0, "gnutls seal: %s", tc_last_error());
    CHECK(tc_gcm_seal(b, nonce, ad, na, dy, nd, tag_b) == 0, "%s seal: %s", name, tc_last_error());
    CHECK(memcmp(x, y, len) == 0 && memcmp(tag_a, tag_b, 16) == 0,
          "round %d, %zu bytes, %zu of AAD: %s and GnuTLS disagree", round, len, alen, name);
    CHECK(tc_gcm_open(b, nonce, ad, na, dx, nd, tag_a) == 0 && memcmp(x, pt, len) == 0,
          "round %d: %s does not open what GnuTLS sealed: %s", round, name, tc_last_error());
    CHECK(tc_gcm_open(a, nonce, ad, na, dy, nd, tag_b) == 0 && memcmp(y, pt, len) == 0,
          "round %d: GnuTLS does not open what %s sealed: %s", round, name, tc_last_error());
    /* seal_copy gathers from three pieces of pt straight into y. */
    struct iovec src[3];
    int ns = split(src, pt, len, r[1] % (len + 1), r[2] % (len + 1));
    CHECK(tc_gcm_seal_copy(b, nonce, src, ns, y, len) == 0, "%s seal_copy: %s", name, tc_last_error());
    CHECK(tc_gcm_seal(a, nonce, NULL, 0, dx, nd, tag_a) == 0, "gnutls seal: %s", tc_last_error());
    CHECK(memcmp(x, y, len) == 0 && memcmp(tag_a, y + len, 16) == 0,
          "round %d, %zu bytes: %s seal_copy differs from GnuTLS's seal", round, len, name);
    tc_gcm_free(a);
    tc_gcm_free(b);
  }
  /* AAD beyond what the path gathers: refused with a message, not
   * overflowed. */
  uint8_t big[2048] = { 0 }, tag[16];
  struct iovec bad = { big, sizeof big }, d = { x, 16 };
  CHECK(tc_gcm_new_impl(&b, key, impl) == 0, "tc_gcm_new_impl: %s", tc_last_error());
  errno = 0;
  CHECK(tc_gcm_seal(b, nonce, &bad, 1, &d, 1, tag) < 0 && errno == EINVAL && strstr(tc_last_error(), "additional data"),
        "2 KiB of AAD: %s", tc_last_error());
  tc_gcm_free(b);
  free(pt); free(x); free(y);
}

/* --- X25519 (RFC 7748) --------------------------------------------------- */

static void
test_x25519(void)
{
  static const struct { const char *scalar, *u, *out; } v[] = {
    { "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
      "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
      "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552" },
    /* The u of this one has its top bit set, which must be masked. */
    { "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
      "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
      "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957" },
  };
  uint8_t out[32];
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    uint8_t *k = tv_unhex(v[i].scalar, NULL), *u = tv_unhex(v[i].u, NULL);
    CHECK(tc_x25519(out, k, u) == 0, "X25519 5.2 vector %zu: %s", i + 1, tc_last_error());
    CHECK(eq_hex(out, v[i].out, 32), "X25519 5.2 vector %zu: wrong result", i + 1);
    free(k);
    free(u);
  }

  /* Iterated: k = X25519(k, u), u = old k, from k = u = 9. */
  uint8_t k[32] = { 9 }, u[32] = { 9 }, next[32];
  for (int i = 1; i <= 1000; i++) {
    CHECK(tc_x25519(next, k, u) == 0, "X25519 iteration %d: %s", i, tc_last_error());
    memcpy(u, k, 32);
    memcpy(k, next, 32);
    if (i == 1)
      CHECK(eq_hex(k, "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079", 32),
            "X25519 after 1 iteration");
  }
  CHECK(eq_hex(k, "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51", 32),
        "X25519 after 1000 iterations");

  /* Section 6.1: both sides of the exchange. */
  uint8_t *a = tv_unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", NULL);
  uint8_t *b = tv_unhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", NULL);
  uint8_t apub[32], bpub[32], s1[32], s2[32];
  tc_x25519_base(apub, a);
  tc_x25519_base(bpub, b);
  CHECK(eq_hex(apub, "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a", 32), "Alice's public key");
  CHECK(eq_hex(bpub, "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f", 32), "Bob's public key");
  CHECK(tc_x25519(s1, a, bpub) == 0 && tc_x25519(s2, b, apub) == 0, "X25519 exchange: %s", tc_last_error());
  CHECK(eq_hex(s1, "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742", 32), "Alice's shared secret");
  CHECK(memcmp(s1, s2, 32) == 0, "the two sides disagree");

  /* Low-order points give the all-zero secret and must be refused. */
  static const char *low[] = {
    "0000000000000000000000000000000000000000000000000000000000000000",   /* 0 */
    "0100000000000000000000000000000000000000000000000000000000000000",   /* 1 */
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",   /* p - 1 */
    "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",   /* order 8 */
    "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",   /* order 8 */
  };
  for (size_t i = 0; i < sizeof low / sizeof low[0]; i++) {
    uint8_t *p = tv_unhex(low[i], NULL);
    errno = 0;
    CHECK(tc_x25519(out, a, p) < 0 && errno == EINVAL, "low-order point %s accepted", low[i]);
    free(p);
  }
  CHECK(strstr(tc_last_error(), "low-order") != NULL, "message: %s", tc_last_error());
  free(a);
  free(b);
}

/* --- HKDF (RFC 5869), HMAC (RFC 4231), SHA-256 ------------------------- */

static void
test_hkdf(void)
{
  uint8_t ikm[80], salt[80], info[80], prk[32], okm[82];
  /* Test case 1 */
  memset(ikm, 0x0b, 22);
  for (int i = 0; i < 13; i++) salt[i] = (uint8_t) i;
  for (int i = 0; i < 10; i++) info[i] = (uint8_t) (0xf0 + i);
  tc_hkdf_extract(salt, 13, ikm, 22, prk);
  CHECK(eq_hex(prk, "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5", 32), "HKDF TC1 PRK");
  CHECK(tc_hkdf_expand(prk, info, 10, okm, 42) == 0, "HKDF TC1 expand: %s", tc_last_error());
  CHECK(eq_hex(okm, "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865", 42),
        "HKDF TC1 OKM");
  /* Test case 2: 80-byte inputs, 82 bytes out */
  for (int i = 0; i < 80; i++) {
    ikm[i] = (uint8_t) i;
    salt[i] = (uint8_t) (0x60 + i);
    info[i] = (uint8_t) (0xb0 + i);
  }
  tc_hkdf_extract(salt, 80, ikm, 80, prk);
  CHECK(eq_hex(prk, "06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244", 32), "HKDF TC2 PRK");
  CHECK(tc_hkdf_expand(prk, info, 80, okm, 82) == 0, "HKDF TC2 expand: %s", tc_last_error());
  CHECK(eq_hex(okm, "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
                    "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
                    "cc30c58179ec3e87c14c01d5c1f3434f1d87", 82), "HKDF TC2 OKM");
  /* Test case 3: no salt, no info */
  memset(ikm, 0x0b, 22);
  tc_hkdf_extract(NULL, 0, ikm, 22, prk);
  CHECK(eq_hex(prk, "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04", 32), "HKDF TC3 PRK");
  CHECK(tc_hkdf_expand(prk, NULL, 0, okm, 42) == 0, "HKDF TC3 expand: %s", tc_last_error());
  CHECK(eq_hex(okm, "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8", 42),
        "HKDF TC3 OKM");
  /* A zero-length salt equals HashLen zeros (RFC 5869 2.2). */
  uint8_t zeros[32] = { 0 }, prk2[32];
  tc_hkdf_extract(zeros, 32, ikm, 22, prk2);
  CHECK(memcmp(prk, prk2, 32) == 0, "HKDF: absent salt is not 32 zero bytes");
  /* Too much output is refused. */
  static uint8_t big[255 * 32 + 1];
  CHECK(tc_hkdf_expand(prk, NULL, 0, big, sizeof big - 1) == 0, "HKDF 255*32 bytes: %s", tc_last_error());
  CHECK(tc_hkdf_expand(prk, NULL, 0, big, sizeof big) < 0 && errno == EINVAL, "HKDF of 255*32+1 bytes accepted");
}

static void
test_hmac_sha256(void)
{
  uint8_t out[32], key[131], data[152];
  memset(key, 0x0b, 20);
  tc_hmac_sha256(key, 20, "Hi There", 8, out);
  CHECK(eq_hex(out, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7", 32), "RFC 4231 TC1");
  tc_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, out);
  CHECK(eq_hex(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", 32), "RFC 4231 TC2");
  memset(key, 0xaa, 20);
  memset(data, 0xdd, 50);
  tc_hmac_sha256(key, 20, data, 50, out);
  CHECK(eq_hex(out, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe", 32), "RFC 4231 TC3");
  for (int i = 0; i < 25; i++) key[i] = (uint8_t) (i + 1);
  memset(data, 0xcd, 50);
  tc_hmac_sha256(key, 25, data, 50, out);
  CHECK(eq_hex(out, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b", 32), "RFC 4231 TC4");
  memset(key, 0x0c, 20);
  tc_hmac_sha256(key, 20, "Test With Truncation", 20, out);
  CHECK(eq_hex(out, "a3b6167473100ee06e0c796c2955552b", 16), "RFC 4231 TC5 (truncated to 128 bits)");
  memset(key, 0xaa, 131);
  const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  tc_hmac_sha256(key, 131, m6, strlen(m6), out);
  CHECK(eq_hex(out, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54", 32), "RFC 4231 TC6");
  const char *m7 = "This is a test using a larger than block-size key and a larger than block-size data. "
                   "The key needs to be hashed before being used by the HMAC algorithm.";
  tc_hmac_sha256(key, 131, m7, strlen(m7), out);
  CHECK(eq_hex(out, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2", 32), "RFC 4231 TC7");

  /* FIPS 180 examples, and a million 'a'. */
  tc_sha256("", 0, out);
  CHECK(eq_hex(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 32), "SHA-256 of \"\"");
  tc_sha256("abc", 3, out);
  CHECK(eq_hex(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", 32), "SHA-256 of abc");
  const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  tc_sha256(m448, strlen(m448), out);
  CHECK(eq_hex(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1", 32), "SHA-256 of 448 bits");
  char *million = malloc(1000000);
  CHECK(million != NULL, "out of memory");
  if (million) {
    memset(million, 'a', 1000000);
    tc_sha256(million, 1000000, out);
    CHECK(eq_hex(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", 32), "SHA-256 of a million a");
    free(million);
  }
}

/* --- the CPU's flags, as the kernel lists them -------------------------- */

/* Whether /proc/cpuinfo's first "flags" line holds every flag of the
 * space-separated list: 1 or 0, -1 where it cannot be read. */
static int
cpuinfo_has_all(const char *list)
{
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f)
    return -1;
  char *line = NULL;
  size_t cap = 0;
  int r = -1;
  while (r < 0 && getline(&line, &cap, f) > 0) {
    if (strncmp(line, "flags", 5))
      continue;
    char *colon = strchr(line, ':');
    if (!colon)
      continue;
    r = 1;
    char want[256];
    snprintf(want, sizeof want, "%s", list);
    for (char *save = NULL, *w = strtok_r(want, " ", &save); w && r; w = strtok_r(NULL, " ", &save)) {
      char pat[64];
      snprintf(pat, sizeof pat, " %s", w);
      const char *at = colon;
      r = 0;
      while ((at = strstr(at, pat))) {
        at += strlen(pat);
        if (*at == ' ' || *at == '\n' || *at == 0) {
          r = 1;
          break;
        }
      }
    }
  }
  free(line);
  fclose(f);
  return r;
}

/* --- XXH3-64 against Debian's libxxhash --------------------------------- */

/* Whether this CPU can run each build. */
static int
cpu_has(const char *feature)
{
  __builtin_cpu_init();
  if (!strcmp(feature, "avx2"))
    return __builtin_cpu_supports("avx2");
  if (!strcmp(feature, "avx512f"))
    return __builtin_cpu_supports("avx512f");
  return 1;
}

static void
test_xxh3(void)
{
  enum { MAX = (1 << 20) + 64 };
  uint8_t *buf = malloc(MAX);
  CHECK(buf != NULL, "out of memory");
  if (!buf)
    return;
  CHECK(tc_random(buf, MAX) == 0, "tc_random: %s", tc_last_error());
  CHECK(tc_xxh3_64("", 0) == 0x2D06800538D394C2ULL, "XXH3-64 of the empty string");

  struct { const char *name; uint64_t (*fn)(const void *, size_t, uint64_t); const char *cpu; } builds[] = {
    { "dispatch", tc_xxh3_64_seed, "" },
    { "sse2", tc_xxh3_64_seed_sse2, "" },
    { "avx2", tc_xxh3_64_seed_avx2, "avx2" },
    { "avx512", tc_xxh3_64_seed_avx512, "avx512f" },
  };
  static const uint64_t seeds[] = { 0, 1, 42, 0x9e3779b97f4a7c15ULL, UINT64_MAX };
  int tested = 0;
  for (size_t b = 0; b < sizeof builds / sizeof builds[0]; b++) {
    if (builds[b].cpu[0] && !cpu_has(builds[b].cpu)) {
      printf("# XXH3 %s build not checked: the CPU lacks %s\n", builds[b].name, builds[b].cpu);
      continue;
    }
    tested++;
    long bad = 0, n = 0;
    /* Every length 0..4160 (all of XXH3's short, mid and long paths and
     * stripe/block edges), from an aligned and a misaligned start. */
    for (size_t len = 0; len <= 4160; len++)
      for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s += (len % 7 == 0 ? 1 : 2)) {
        size_t off = len & 1 ? 3 : 0;
        n++;
        if (builds[b].fn(buf + off, len, seeds[s]) != XXH3_64bits_withSeed(buf + off, len, seeds[s]))
          bad++;
        if (seeds[s] == 0 && builds[b].fn(buf + off, len, 0) != XXH3_64bits(buf + off, len))
          bad++;
      }
    /* Large inputs: several blocks, odd tails, 1 MiB. */
    static const size_t big[] = { 8191, 65536, 100003, 1 << 20, (1 << 20) + 63 };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
      for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        n++;
        if (builds[b].fn(buf + 1, big[i], seeds[s]) != XXH3_64bits_withSeed(buf + 1, big[i], seeds[s]))
          bad++;
      }
    CHECK(bad == 0, "XXH3 %s build: %ld of %ld hashes differ from libxxhash", builds[b].name, bad, n);
  }
  CHECK(tested >= 2, "no XXH3 build checked");
  /* The dispatcher's seed-0 entry equals the unseeded hash. */
  CHECK(tc_xxh3_64(buf, 4096) == XXH3_64bits(buf, 4096), "tc_xxh3_64 differs from XXH3_64bits");
  /* And a hash depends on its input and seed. */
  uint64_t h = tc_xxh3_64_seed(buf, 4096, 5);
  buf[4095] ^= 1;
  CHECK(tc_xxh3_64_seed(buf, 4096, 5) != h && tc_xxh3_64_seed(buf, 4096, 6) != tc_xxh3_64_seed(buf, 4096, 5),
        "XXH3 ignores its input or seed");
  free(buf);
}

#if defined(__x86_64__)
/* XINUSE (XGETBV with ECX=1): bit 2 = upper halves of ymm0-15 in use,
 * bit 6 = upper halves of zmm0-15 in use. -1 if the CPU cannot tell. */
static long
xinuse(void)
{
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
    return -1;
  if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & (1u << 2)))
    return -1;
  unsigned lo, hi;
  __asm__ volatile ("xgetbv" : "=a" (lo), "=d" (hi) : "c" (1));
  return (long) lo;
}
#endif

/* After a hash the upper vector state must be clean: a dirty state slows
 * the legacy-SSE AES-NI code GnuTLS runs next (XTS: 3.4 vs 6.3 GB/s). */
static void
test_xxh3_upper_state(void)
{
#if defined(__x86_64__)
  if (xinuse() < 0) {
    printf("# XINUSE not available: upper-state check skipped\n");
    return;
  }
  static uint8_t buf[65536];
  struct { const char *name; uint64_t (*fn)(const void *, size_t, uint64_t); const char *cpu; } builds[] = {
    { "dispatch", tc_xxh3_64_seed, "" },
    { "avx2", tc_xxh3_64_seed_avx2, "avx2" },
    { "avx512", tc_xxh3_64_seed_avx512, "avx512f" },
  };
  volatile uint64_t sink = 0;
  for (size_t b = 0; b < sizeof builds / sizeof builds[0]; b++) {
    if (builds[b].cpu[0] && !cpu_has(builds[b].cpu))
      continue;
    static const size_t lens[] = { 100, 200, 4096, 65536 };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
      for (uint64_t seed = 0; seed < 2; seed++) {
        sink += builds[b].fn(buf, lens[i], seed);
        long st = xinuse();
        CHECK((st & ((1 << 2) | (1 << 6))) == 0,
              "XXH3 %s build, %zu bytes, seed %llu: returns with dirty upper vector state (XINUSE %#lx)",
              builds[b].name, lens[i], (unsigned long long) seed, st);
      }
    }
  }
  (void) sink;
#endif
}

/* --- secrets ----------------------------------------------------------- */

static void
test_secrets(void)
{
  uint8_t a[64], b[64];
  CHECK(tc_random(a, sizeof a) == 0, "tc_random: %s", tc_last_error());
  memcpy(b, a, sizeof a);
  CHECK(tc_memeq_ct(a, b, sizeof a) == 1, "equal buffers compare unequal");
  CHECK(tc_memeq_ct(a, b, 0) == 1, "empty buffers compare unequal");
  int missed = 0;
  for (size_t i = 0; i < sizeof a; i++)
    for (int bit = 0; bit < 8; bit++) {
      b[i] ^= (uint8_t) (1 << bit);
      missed += tc_memeq_ct(a, b, sizeof a) != 0;
      b[i] ^= (uint8_t) (1 << bit);
    }
  CHECK(missed == 0, "tc_memeq_ct missed %d single-bit differences", missed);
  CHECK(tc_memeq_ct(a, b, sizeof a) == 1, "restored buffers compare unequal");

  uint8_t r1[32], r2[32], zero[32] = { 0 };
  CHECK(tc_random(r1, 32) == 0 && tc_random(r2, 32) == 0 && memcmp(r1, r2, 32) != 0 && memcmp(r1, zero, 32) != 0,
        "tc_random repeats or gives zeros");

  uint8_t *secret = malloc(4096);
  CHECK(secret != NULL, "out of memory");
  if (secret) {
    memset(secret, 0x5a, 4096);
    tc_wipe(secret + 1, 4094);
    int left = 0;
    for (int i = 1; i < 4095; i++)
      left += secret[i] != 0;
    CHECK(left == 0 && secret[0] == 0x5a && secret[4095] == 0x5a, "tc_wipe left %d bytes or overran", left);
    free(secret);
  }
}

int
main(void)
{
  char msg[256];
  CHECK(tc_crypto_init() == 0, "tc_crypto_init: %s", tc_last_error());
  CHECK(tc_crypto_selftest(msg, sizeof msg) == 0, "%s", msg);
  printf("# %s\n", msg);
  printf("# AES-256-XTS: %s\n", tc_xts_impl_name());
  test_xts_vectors(TC_XTS_AUTO);
  test_xts_vectors(TC_XTS_GNUTLS);
  test_xts_sectors(TC_XTS_AUTO);
  test_xts_sectors(TC_XTS_GNUTLS);
  test_gcm_vectors(TC_GCM_AUTO);
  test_gcm_vectors(TC_GCM_GNUTLS);
  /* ipsec-mb is built in on x86-64 (configure requires it there) and every
   * CPU these tests run on has AES-NI: its absence is a failure, not a skip. */
  printf("# AES-256-GCM: %s\n", tc_gcm_impl_name());
#if defined(HAVE_IPSEC_MB)
  CHECK(strncmp(tc_gcm_impl_name(), "gnutls", 6) != 0, "ipsec-mb built in but not used: %s", tc_gcm_impl_name());
  test_gcm_vectors(TC_GCM_IPSEC_MB);
  test_gcm_cross(TC_GCM_IPSEC_MB, "ipsec-mb", 300, 70000);
#else
  struct tc_gcm *none;
  errno = 0;
  CHECK(tc_gcm_new_impl(&none, (const uint8_t[32]) { 0 }, TC_GCM_IPSEC_MB) < 0 && errno == ENOTSUP,
        "ipsec-mb context in a build without it");
#endif
  /* Our VAES code where the CPU has it; a clear refusal where it does not.
   * "Has it" as the kernel sees the CPU: the library asks CPUID itself. */
  struct tc_gcm *v;
  int vaes_ok = tc_gcm_new_impl(&v, (const uint8_t[32]) { 0 }, TC_GCM_VAES) == 0;
  int vaes_cpu = cpuinfo_has_all("avx2 aes pclmulqdq vaes vpclmulqdq");
  if (vaes_cpu >= 0)
    CHECK(vaes_ok == vaes_cpu, "the VAES code is %s, but /proc/cpuinfo says the CPU %s avx2, aes, pclmulqdq, "
          "vaes and vpclmulqdq", vaes_ok ? "usable" : "refused", vaes_cpu ? "has" : "lacks one of");
  if (vaes_ok) {
    tc_gcm_free(v);
    printf("# AES-256-GCM on 256-bit VAES: tested\n");
    test_gcm_vectors(TC_GCM_VAES);
    test_gcm_cross(TC_GCM_VAES, "vaes-avx2", 300, 70000);
    test_gcm_cross(TC_GCM_VAES, "vaes-avx2", 3000, 1100); /* many cuts near block edges */
    test_xts_vectors(TC_XTS_VAES);
    test_xts_sectors(TC_XTS_VAES);
    test_xts_cross();
  } else {
    CHECK(errno == ENOTSUP && strstr(tc_last_error(), "VAES"), "VAES context: %s", tc_last_error());
    struct tc_xts *xv;
    uint8_t k64[64] = { 1 };
    CHECK(tc_xts_new_impl(&xv, k64, TC_XTS_VAES) < 0 && errno == ENOTSUP, "VAES XTS context on a CPU without VAES");
    printf("# AES-256-GCM on 256-bit VAES: this CPU lacks it (%s)\n", tc_last_error());
  }
  test_x25519();
  test_hkdf();
  test_hmac_sha256();
  test_xxh3();
  test_xxh3_upper_state();
  test_secrets();
  return DONE();
}
