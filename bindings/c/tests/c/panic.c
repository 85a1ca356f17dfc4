/* What a panic inside libgnomon comes back to C as: run by
 * tests/c_programs.rs as
 *   panic HOST:PORT PUBKEY_BASE64
 * against a real `gnomon serve`, linked with the debug build's static
 * library (target/debug/libgnomon.a), whose entry points panic after their
 * work when GNOMON_TEST_PANIC is set (a debug-only stand-in for a bug).
 * First one real exchange verifies; then, with the variable set, every
 * entry point must return GNOMON_ERR_INTERNAL, fill no time into its
 * result, and leave this program running. Prints "ok N checks". */
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

#define INTERNAL(call)                                                     \
  do {                                                                     \
    gnomon_error got_ = (call);                                            \
    checks++;                                                              \
    if (got_ != GNOMON_ERR_INTERNAL) {                                     \
      fprintf(stderr, "panic.c:%d: %s gave %d (%s), not the internal "     \
              "error\n", __LINE__, #call, (int)got_,                       \
              gnomon_error_string(got_));                                  \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* A result a panic came back in: the code and its sentence, no time. */
static void no_time(const gnomon_result *r) {
  CHECK(r->code == GNOMON_ERR_INTERNAL);
  CHECK(r->version == 0 && r->midpoint_us == 0 && r->radius_us == 0);
  CHECK(strcmp(r->message, gnomon_error_string(GNOMON_ERR_INTERNAL)) == 0);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: panic HOST:PORT PUBKEY_BASE64\n");
    return 2;
  }
  struct sockaddr_in server;
  int sock = udp_to(argv[1], &server);

  /* Before: a real exchange that verifies. */
  CHECK(getenv("GNOMON_TEST_PANIC") == NULL);
  uint8_t key[32];
  CHECK(gnomon_parse_public_key(argv[2], key) == GNOMON_OK);
  uint8_t req[GNOMON_REQUEST_SIZE], resp[GNOMON_REQUEST_SIZE];
  size_t req_len = 0;
  CHECK(gnomon_build_request_random(GNOMON_VERSION_RFC, key, req, sizeof req,
                                    &req_len) == GNOMON_OK);
  CHECK(sendto(sock, req, req_len, 0, (struct sockaddr *)&server,
               sizeof server) == (ssize_t)req_len);
  ssize_t got = recv(sock, resp, sizeof resp, 0);
  CHECK(got > 0);
  size_t resp_len = (size_t)got;
  gnomon_result r;
  CHECK(gnomon_verify(req, req_len, resp, resp_len, key, &r) == GNOMON_OK);
  CHECK(r.midpoint_us > 0);

  /* Now every call's work succeeds and then panics. */
  CHECK(setenv("GNOMON_TEST_PANIC", "1", 1) == 0);
  memset(&r, 0xff, sizeof r);
  INTERNAL(gnomon_verify(req, req_len, resp, resp_len, key, &r));
  no_time(&r);
  memset(&r, 0xff, sizeof r);
  INTERNAL(gnomon_query(argv[1], key, GNOMON_VERSION_RFC, 10000, &r));
  no_time(&r);

  size_t n = 0;
  INTERNAL(gnomon_nonce_length(GNOMON_VERSION_RFC, &n));
  uint8_t nonce[GNOMON_MAX_NONCE] = {0}, out[GNOMON_REQUEST_SIZE];
  INTERNAL(gnomon_build_request(GNOMON_VERSION_RFC, nonce, 32, key, out,
                                sizeof out, &n));
  INTERNAL(gnomon_build_request_random(GNOMON_VERSION_RFC, key, out,
                                       sizeof out, &n));
  INTERNAL(gnomon_chain_nonce(GNOMON_VERSION_RFC, resp, resp_len, nonce, 32,
                              out, sizeof out, &n));
  uint8_t parsed[32];
  INTERNAL(gnomon_parse_public_key(argv[2], parsed));

  gnomon_exchange chain[1] = {{req, req_len, resp, resp_len, NULL, 0, key}};
  gnomon_chain_result cr;
  memset(&cr, 0xff, sizeof cr);
  INTERNAL(gnomon_check_chain(chain, 1, &cr));
  CHECK(cr.code == GNOMON_ERR_INTERNAL && cr.index == 0 && cr.other == 0);
  CHECK(strcmp(cr.message, gnomon_error_string(GNOMON_ERR_INTERNAL)) == 0);

  /* Still here, and the library still works once the bug is gone. */
  CHECK(unsetenv("GNOMON_TEST_PANIC") == 0);
  CHECK(gnomon_verify(req, req_len, resp, resp_len, key, &r) == GNOMON_OK);
  printf("ok %d checks\n", checks);
  return 0;
}
