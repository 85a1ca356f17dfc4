/* Verifying a post-quantum (0x90000001, ML-DSA-44) answer from C: run by
 * tests/c_programs.rs as
 *   ml_dsa REQUEST RESPONSE KEY_HEX
 * with the exchange captured from tannerryan/roughtime
 * (tests/external-vectors/tannerryan-ml-dsa-44), linked with the release
 * static library under ASan and UBSan, and with the no_std build (so only
 * what a firmware build declares: GNOMON_NO_STD is defined before the
 * header). Buffers are sized as docs/C.md says: the key in
 * GNOMON_MAX_KEY_LEN bytes, the response in GNOMON_MAX_INPUT.
 * Prints "ok N checks" and exits 0, or names the first failed check. */
#define GNOMON_NO_STD
#include "gnomon.h"

#include "check.h"

#define EXPECT(call, code)                                                 \
  do {                                                                     \
    gnomon_error got_ = (call);                                            \
    checks++;                                                              \
    if (got_ != (code)) {                                                  \
      fprintf(stderr, "ml_dsa.c:%d: %s gave %d (%s), expected %s\n",       \
              __LINE__, #call, (int)got_, gnomon_error_string(got_),       \
              #code);                                                      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* The whole file into `buf` (at most cap - 1 bytes, NUL after them); its
 * length. */
static size_t slurp(const char *path, uint8_t *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  size_t n = fread(buf, 1, cap - 1, f);
  /* All of it: nothing left past what was read. */
  CHECK(fgetc(f) == EOF && ferror(f) == 0);
  fclose(f);
  buf[n] = 0;
  return n;
}

static uint8_t request[GNOMON_REQUEST_SIZE + 1];
static uint8_t response[GNOMON_MAX_INPUT + 1];
static uint8_t forged[GNOMON_MAX_INPUT];
static char key_text[4096 + 1];

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ml_dsa REQUEST RESPONSE KEY_HEX\n");
    return 2;
  }
  size_t request_len = slurp(argv[1], request, sizeof request);
  size_t response_len = slurp(argv[2], response, sizeof response);
  slurp(argv[3], (uint8_t *)key_text, sizeof key_text);
  CHECK(response_len > 6000);

  uint8_t key[GNOMON_MAX_KEY_LEN];
  size_t key_len = 0;
  EXPECT(gnomon_parse_public_key_any(key_text, key, sizeof key, &key_len),
         GNOMON_OK);
  CHECK(key_len == GNOMON_ML_DSA_44_KEY_LEN);

  gnomon_result r;
  EXPECT(gnomon_verify_any_key(request, request_len, response, response_len,
                               key, key_len, &r),
         GNOMON_OK);
  CHECK(r.code == GNOMON_OK);
  CHECK(r.version == GNOMON_VERSION_ML_DSA_44);
  /* What tannerryan's client printed for this exchange. */
  CHECK(r.midpoint_us == 1795763307000000ULL);
  CHECK(r.radius_us == 3000000ULL);
  CHECK(strcmp(r.message, "success") == 0);

  /* A byte changed fails (tests/ml_dsa.rs names the code for each
   * signature); and the result carries no time. */
  memcpy(forged, response, response_len);
  forged[response_len - 1] ^= 1;
  gnomon_error got = gnomon_verify_any_key(request, request_len, forged,
                                           response_len, key, key_len, &r);
  CHECK(got != GNOMON_OK && r.code == got && r.midpoint_us == 0);

  /* Cut short: malformed, not read past its end (ASan would see it). */
  EXPECT(gnomon_verify_any_key(request, request_len, response,
                               response_len - 1, key, key_len, &r),
         GNOMON_ERR_MALFORMED);

  /* A key of no scheme's length, and none. */
  EXPECT(gnomon_verify_any_key(request, request_len, response, response_len,
                               key, key_len - 1, &r),
         GNOMON_ERR_KEY);
  CHECK(r.code == GNOMON_ERR_KEY && strlen(r.message) > 0);
  EXPECT(gnomon_verify_any_key(request, request_len, response, response_len,
                               NULL, key_len, &r),
         GNOMON_ERR_NULL);
  /* The 32-byte API reads an Ed25519 key, which signed nothing here. */
  EXPECT(gnomon_verify(request, request_len, response, response_len, key, &r),
         GNOMON_ERR_DELEGATION_SIGNATURE);

  /* A chain of this one exchange, its key's length in the exchange. */
  gnomon_exchange_any_key e = {request, request_len, response, response_len,
                               NULL, 0, key, key_len};
  gnomon_chain_result c;
  EXPECT(gnomon_check_chain_any_key(&e, 1, &c), GNOMON_OK);

  /* A request for the version, naming the key in SRV. */
  uint8_t nonce[32] = {7}, built[GNOMON_REQUEST_SIZE];
  size_t built_len = 0, nonce_len = 0;
  EXPECT(gnomon_nonce_length(GNOMON_VERSION_ML_DSA_44, &nonce_len), GNOMON_OK);
  CHECK(nonce_len == sizeof nonce);
  EXPECT(gnomon_build_request_any_key(GNOMON_VERSION_ML_DSA_44, nonce,
                                      nonce_len, key, key_len, built,
                                      sizeof built, &built_len),
         GNOMON_OK);
  CHECK(built_len == GNOMON_REQUEST_SIZE);
  EXPECT(gnomon_build_request_any_key(GNOMON_VERSION_ML_DSA_44, nonce,
                                      nonce_len, key, 100, built,
                                      sizeof built, &built_len),
         GNOMON_ERR_KEY);

  printf("ok %d checks\n", checks);
  return 0;
}
