/* The C side of libgnomon's tests: run by tests/c_programs.rs as
 *   api HOST:PORT PUBKEY_BASE64
 * against a real `gnomon serve`, linked with the static library (under
 * ASan and UBSan where the compiler has them) and with the shared one.
 * Builds requests, sends them over UDP itself, verifies, chains, and
 * checks the error codes C callers reach with bad arguments. Prints
 * "ok N checks" and exits 0, or names the first failed check. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "gnomon.h"

#define EXPECT(call, code)                                                 \
  do {                                                                     \
    gnomon_error got_ = (call);                                            \
    checks++;                                                              \
    if (got_ != (code)) {                                                  \
      fprintf(stderr, "api.c:%d: %s gave %d (%s), expected %s\n",          \
              __LINE__, #call, (int)got_, gnomon_error_string(got_),       \
              #code);                                                      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static int sock;
static struct sockaddr_in server;

/* Send a request and wait (bounded) for the answer; its length. */
static size_t exchange(const uint8_t *req, size_t len, uint8_t *resp,
                       size_t cap) {
  CHECK(sendto(sock, req, len, 0, (struct sockaddr *)&server,
               sizeof server) == (ssize_t)len);
  ssize_t n = recv(sock, resp, cap, 0);
  CHECK(n > 0);
  return (size_t)n;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: api HOST:PORT PUBKEY_BASE64\n");
    return 2;
  }
  sock = udp_to(argv[1], &server);

  uint8_t key[32], wrong[32];
  EXPECT(gnomon_parse_public_key(argv[2], key), GNOMON_OK);
  memcpy(wrong, key, 32);
  wrong[0] ^= 1;

  /* Every code has a sentence (the last is GNOMON_ERR_LIST_MALFORMED);
   * unknown values have one too. */
  for (int c = GNOMON_OK; c <= GNOMON_ERR_LIST_MALFORMED; c++) {
    const char *s = gnomon_error_string(c);
    CHECK(s != NULL && strlen(s) > 0 && strcmp(s, "unknown error code") != 0);
  }
  CHECK(strcmp(gnomon_error_string(-1), "unknown error code") == 0);
  CHECK(strcmp(gnomon_error_string(GNOMON_ERR_LIST_MALFORMED + 1),
               "unknown error code") == 0);

  /* One exchange with a nonce from the OS, verified. */
  uint8_t req1[GNOMON_REQUEST_SIZE], resp1[GNOMON_REQUEST_SIZE];
  size_t req1_len = 0;
  EXPECT(gnomon_build_request_random(GNOMON_VERSION_RFC, key, req1,
                                     sizeof req1, &req1_len),
         GNOMON_OK);
  CHECK(req1_len == GNOMON_REQUEST_SIZE);
  size_t resp1_len = exchange(req1, req1_len, resp1, sizeof resp1);
  gnomon_result r;
  EXPECT(gnomon_verify(req1, req1_len, resp1, resp1_len, key, &r), GNOMON_OK);
  CHECK(r.code == GNOMON_OK && r.version == GNOMON_VERSION_RFC);
  CHECK(r.midpoint_us > 1700000000ull * 1000000 && r.radius_us > 0);
  CHECK(strcmp(r.message, "success") == 0);

  /* The wrong key: the delegation's signature fails, nothing else set. */
  EXPECT(gnomon_verify(req1, req1_len, resp1, resp1_len, wrong, &r),
         GNOMON_ERR_DELEGATION_SIGNATURE);
  CHECK(r.code == GNOMON_ERR_DELEGATION_SIGNATURE && r.midpoint_us == 0 &&
        r.version == 0 && strstr(r.message, "not signed by this public key"));

  /* A second exchange chained from the first, in Google's format. */
  size_t nonce_len = 0;
  EXPECT(gnomon_nonce_length(GNOMON_VERSION_GOOGLE, &nonce_len), GNOMON_OK);
  CHECK(nonce_len == 64);
  uint8_t rand2[GNOMON_MAX_NONCE], nonce2[GNOMON_MAX_NONCE];
  for (size_t i = 0; i < nonce_len; i++) rand2[i] = (uint8_t)(i * 7 + 1);
  size_t n2 = 0;
  EXPECT(gnomon_chain_nonce(GNOMON_VERSION_GOOGLE, resp1, resp1_len, rand2,
                            nonce_len, nonce2, sizeof nonce2, &n2),
         GNOMON_OK);
  CHECK(n2 == nonce_len);
  uint8_t req2[GNOMON_REQUEST_SIZE], resp2[GNOMON_REQUEST_SIZE];
  size_t req2_len = 0;
  EXPECT(gnomon_build_request(GNOMON_VERSION_GOOGLE, nonce2, n2, NULL, req2,
                              sizeof req2, &req2_len),
         GNOMON_OK);
  size_t resp2_len = exchange(req2, req2_len, resp2, sizeof resp2);
  EXPECT(gnomon_verify(req2, req2_len, resp2, resp2_len, key, &r), GNOMON_OK);
  CHECK(r.version == GNOMON_VERSION_GOOGLE);

  gnomon_exchange chain[2] = {
      {req1, req1_len, resp1, resp1_len, NULL, 0, key},
      {req2, req2_len, resp2, resp2_len, rand2, nonce_len, key},
  };
  gnomon_chain_result cr;
  EXPECT(gnomon_check_chain(chain, 2, &cr), GNOMON_OK);
  CHECK(cr.code == GNOMON_OK && strcmp(cr.message, "success") == 0);
  /* Another rand: the second nonce is not the chained one. */
  uint8_t other_rand[GNOMON_MAX_NONCE];
  memcpy(other_rand, rand2, nonce_len);
  other_rand[5] ^= 0x80;
  chain[1].rand = other_rand;
  EXPECT(gnomon_check_chain(chain, 2, &cr), GNOMON_ERR_CHAIN_NONCE);
  CHECK(cr.index == 1 && cr.other == 1);
  chain[1].rand = rand2;
  /* Swapped responses: Google's bare answer to a framed request. */
  chain[0].response = resp2;
  chain[0].response_len = resp2_len;
  EXPECT(gnomon_check_chain(chain, 2, &cr), GNOMON_ERR_MALFORMED);
  CHECK(cr.index == 0);
  chain[0].response = resp1;
  chain[0].response_len = resp1_len;
  chain[1].rand = NULL;
  EXPECT(gnomon_check_chain(chain, 2, &cr), GNOMON_ERR_NULL);
  CHECK(cr.index == 1);
  chain[1].rand = rand2;
  EXPECT(gnomon_check_chain(chain, 0, &cr), GNOMON_ERR_EMPTY);
  EXPECT(gnomon_check_chain(chain, GNOMON_MAX_CHAIN + 1, &cr),
         GNOMON_ERR_TOO_LONG);
  EXPECT(gnomon_check_chain(NULL, 2, &cr), GNOMON_ERR_NULL);
  EXPECT(gnomon_check_chain(chain, 2, NULL), GNOMON_ERR_NULL);

  /* Arguments: every pointer and length is checked. */
  uint8_t nonce[32] = {1}, out[GNOMON_REQUEST_SIZE];
  size_t w;
  EXPECT(gnomon_build_request(GNOMON_VERSION_RFC, NULL, 32, NULL, out,
                              sizeof out, &w),
         GNOMON_ERR_NULL);
  EXPECT(gnomon_build_request(GNOMON_VERSION_RFC, nonce, 32, NULL, NULL,
                              sizeof out, &w),
         GNOMON_ERR_NULL);
  EXPECT(gnomon_build_request(GNOMON_VERSION_RFC, nonce, 32, NULL, out,
                              sizeof out, NULL),
         GNOMON_ERR_NULL);
  EXPECT(gnomon_build_request(GNOMON_VERSION_RFC, nonce, 0, NULL, out,
                              sizeof out, &w),
         GNOMON_ERR_EMPTY);
  EXPECT(gnomon_build_request(GNOMON_VERSION_RFC, nonce, 31, NULL, out,
                              sizeof out, &w),
         GNOMON_ERR_NONCE_LENGTH);
  EXPECT(gnomon_build_request(GNOMON_VERSION_RFC, nonce, 32, NULL, out,
                              GNOMON_REQUEST_SIZE - 1, &w),
         GNOMON_ERR_BUFFER_TOO_SMALL);
  EXPECT(gnomon_build_request(0x7777, nonce, 32, NULL, out, sizeof out, &w),
         GNOMON_ERR_UNKNOWN_VERSION);
  EXPECT(gnomon_verify(req1, GNOMON_MAX_INPUT + 1, resp1, resp1_len, key, &r),
         GNOMON_ERR_TOO_LONG);
  EXPECT(gnomon_verify(req1, req1_len, resp1, 0, key, &r), GNOMON_ERR_EMPTY);
  EXPECT(gnomon_verify(req1, req1_len, resp1, resp1_len, NULL, &r),
         GNOMON_ERR_NULL);
  CHECK(r.code == GNOMON_ERR_NULL && strlen(r.message) > 0);
  EXPECT(gnomon_verify(req1, req1_len, resp1, resp1_len, key, NULL),
         GNOMON_ERR_NULL);
  EXPECT(gnomon_verify(resp1, 8, resp1, resp1_len, key, &r),
         GNOMON_ERR_REQUEST);
  EXPECT(gnomon_verify(req1, req1_len, resp1, resp1_len / 2, key, &r),
         GNOMON_ERR_MALFORMED);
  EXPECT(gnomon_parse_public_key("not a key", out), GNOMON_ERR_KEY);
  EXPECT(gnomon_parse_public_key("", out), GNOMON_ERR_EMPTY);
  EXPECT(gnomon_parse_public_key(NULL, out), GNOMON_ERR_NULL);
  EXPECT(gnomon_query(argv[1], key, GNOMON_VERSION_AUTO, 0, &r),
         GNOMON_ERR_ARGUMENT);
  EXPECT(gnomon_query("no port here", key, GNOMON_VERSION_AUTO, 1000, &r),
         GNOMON_ERR_ADDRESS);

  /* The blocking query, and with the wrong key. */
  EXPECT(gnomon_query(argv[1], key, GNOMON_VERSION_AUTO, 5000, &r), GNOMON_OK);
  CHECK(r.version == GNOMON_VERSION_RFC && r.radius_us > 0);
  /* The request names the key (SRV) and the server stays silent. */
  EXPECT(gnomon_query(argv[1], wrong, GNOMON_VERSION_RFC, 1000, &r),
         GNOMON_ERR_TIMEOUT);
  CHECK(strstr(r.message, "no answer") != NULL);

  close(sock);
  printf("ok %d checks\n", checks);
  return 0;
}
