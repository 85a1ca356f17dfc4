/* query: ask a Roughtime server for the time through libgnomon.
 *
 *   scripts/build-libgnomon
 *   cc -std=c99 -pedantic -Wall -Wextra -Werror -Itarget/libgnomon/include \
 *      examples/c/query.c target/libgnomon/lib/libgnomon.a \
 *      -Wl,--gc-sections -lpthread -ldl -lm -o query
 *   ./query roughtime.example.net:2002 'iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA='
 *
 * The key is base64 or hex: 32 bytes for Ed25519, or 1312 for the
 * post-quantum ML-DSA-44 variant, which is asked over TCP (docs/PQ.md).
 *
 * Prints the server's time (UTC) and the radius it vouches for, then the
 * same as numbers. Exit status: 0 the time, 1 an answer that failed
 * verification (a forgery), 2 bad arguments, 3 no answer (timeout,
 * address; also a wrong key, since servers ignore requests naming a key
 * they do not hold), 4 the port is closed (nothing listens there).
 *
 * Standard C99 and the header only, hence the flags above. */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "gnomon.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s HOST:PORT PUBKEY\n", argv[0]);
    return 2;
  }
  static uint8_t key[GNOMON_MAX_KEY_LEN];
  size_t key_len = 0;
  gnomon_error err = gnomon_parse_public_key_any(argv[2], key, sizeof key, &key_len);
  if (err != GNOMON_OK) {
    fprintf(stderr, "query: %s\n", gnomon_error_string(err));
    return 2;
  }

  gnomon_result r;
  err = gnomon_query_any_key(argv[1], key, key_len, GNOMON_VERSION_AUTO, 5000, &r);
  switch (err) {
  case GNOMON_OK:
    break;
  case GNOMON_ERR_REFUSED:
    /* An ICMP "port unreachable": an answer from the host, so the key
     * cannot be the reason. */
    fprintf(stderr, "query: no server at %s (error %d): %s\n", argv[1],
            (int)err, r.message);
    fprintf(stderr, "query: check the port, and that the server runs.\n");
    return 4;
  case GNOMON_ERR_TIMEOUT:
  case GNOMON_ERR_ADDRESS:
  case GNOMON_ERR_LOCAL:
    fprintf(stderr, "query: no answer (error %d): %s\n", (int)err, r.message);
    if (err == GNOMON_ERR_TIMEOUT) {
      /* The request names the key it expects (SRV); a server that does
       * not hold it drops the request, which looks exactly like this. */
      fprintf(stderr,
              "query: a server drops requests for a key it does not hold, "
              "and that looks like this: is the public key right? "
              "(If it is, the server may be down or the address wrong.)\n");
    }
    return 3;
  case GNOMON_ERR_ARGUMENT:
  case GNOMON_ERR_EMPTY:
  case GNOMON_ERR_TOO_LONG:
    fprintf(stderr, "query: %s\n", r.message);
    return 2;
  default:
    fprintf(stderr, "query: invalid answer (error %d): %s\n", (int)err,
            r.message);
    return 1;
  }

  time_t secs = (time_t)(r.midpoint_us / 1000000);
  /* gmtime, not POSIX's gmtime_r: standard C, and this program has one
   * thread. */
  const struct tm *utc = gmtime(&secs);
  char when[32];
  if (utc == NULL ||
      strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", utc) == 0) {
    fprintf(stderr, "query: the time does not fit this system's calendar\n");
    return 1;
  }
  printf("%s.%06" PRIu64 " UTC ± %" PRIu64 ".%06" PRIu64
         " s (version 0x%08" PRIx32 ")\n",
         when, r.midpoint_us % 1000000, r.radius_us / 1000000,
         r.radius_us % 1000000, r.version);
  printf("midpoint_us=%" PRIu64 " radius_us=%" PRIu64 "\n", r.midpoint_us,
         r.radius_us);
  return 0;
}
