/* The device of a relayed proof (docs/PROOF.md), in C: run by
 * tests/libgnomon/proof_device/ as
 *   proof BUNDLE DEVICE KEYS ELAPSED_US [SERVERS [MAX_LIARS]]
 * with BUNDLE the binary bundle `gnomon relay` made against real `gnomon
 * serve` processes (or a tampered copy), DEVICE the device value D (raw
 * bytes), KEYS the pinned Ed25519 keys (32 raw bytes each, back to back)
 * and ELAPSED_US the time the device's own clock says has passed since it
 * made D, drift included (required: the API has no "unknown" value).
 * With SERVERS (each key's server id, comma separated: "0,7,7"; "-" for
 * none) the keys go through gnomon_verify_proof_any_key as
 * gnomon_pinned_key values, keys with one non-zero id one voter;
 * MAX_LIARS is the policy's (default "auto": GNOMON_MAX_LIARS_AUTO).
 * Linked with the no_std libgnomon, and
 * GNOMON_NO_STD defined before the header: what a firmware has. It reads
 * no clock (the test checks the linked program calls no libc time
 * function): the only time it knows is the bundle's and ELAPSED_US.
 *
 * Prints one line,
 *   code=N has_interval=B earliest=US latest=US agreeing=K answering=K
 *   needed=K max_liars=F pinned=N entry=I other=I liars=MASK stack=BYTES
 * and exits 0 when the call ran (whatever it returned), 1 when a check of
 * the program's own failed. `stack` is the deepest the verifier's call
 * wrote into a painted region below this frame. */
#define GNOMON_NO_STD
#include "gnomon.h"

#include "check.h"

#include <inttypes.h>

/* Big enough for any bundle of format version 1 (16 entries of a 1312-byte
 * key, a stored request and an answer). */
static uint8_t bundle[GNOMON_MAX_INPUT + 1];
static uint8_t device[GNOMON_MAX_DEVICE_VALUE + 1];
static uint8_t keys[GNOMON_MAX_PROOF_KEYS * GNOMON_ED25519_KEY_LEN + 1];
static gnomon_pinned_key pinned[GNOMON_MAX_PROOF_KEYS];
/* The workspace: static, as a device would place it. */
static gnomon_proof_workspace ws;

static size_t slurp(const char *path, uint8_t *buf, size_t cap) {
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  size_t n = fread(buf, 1, cap - 1, f);
  CHECK(fgetc(f) == EOF && ferror(f) == 0);
  fclose(f);
  return n;
}

/* Stack painting: fill PAINT bytes below main's frame with a pattern,
 * call the verifier, then count how far down the pattern was overwritten.
 * paint() leaves the region's address behind; reading it again after the
 * call reads stack no frame owns, which C leaves undefined and every
 * compiler at -O0 (how the tests build this) does as written. */
#define PAINT (256 * 1024)
#define PATTERN 0xa5

static volatile uintptr_t painted;

__attribute__((noinline)) static void paint(void) {
  uint8_t region[PAINT];
  memset(region, PATTERN, sizeof region);
  painted = (uintptr_t)region;
}

/* The deepest byte the call wrote: region[0] is the lowest address, the
 * stack grows down. */
static size_t painted_depth(void) {
  size_t i = 0;
  const volatile uint8_t *region = (const volatile uint8_t *)painted;
  while (i < PAINT && region[i] == PATTERN) i++;
  return PAINT - i;
}

int main(int argc, char **argv) {
  if (argc < 5 || argc > 7) {
    fprintf(stderr,
            "usage: proof BUNDLE DEVICE KEYS ELAPSED_US [SERVERS [MAX_LIARS]]\n");
    return 2;
  }
  size_t bundle_len = slurp(argv[1], bundle, sizeof bundle);
  size_t device_len = slurp(argv[2], device, sizeof device);
  size_t keys_len = slurp(argv[3], keys, sizeof keys);
  CHECK(keys_len % GNOMON_ED25519_KEY_LEN == 0);
  uint64_t elapsed_us = strtoull(argv[4], NULL, 10);
  size_t n_keys = keys_len / GNOMON_ED25519_KEY_LEN;
  int grouped = argc > 5 && strcmp(argv[5], "-") != 0;
  if (grouped) {
    CHECK(n_keys <= GNOMON_MAX_PROOF_KEYS);
    const char *at = argv[5];
    for (size_t i = 0; i < n_keys; i++) {
      char *end;
      unsigned long id = strtoul(at, &end, 10);
      CHECK(end != at && id <= UINT32_MAX);
      CHECK(*end == (i + 1 < n_keys ? ',' : '\0'));
      at = end + 1;
      pinned[i].public_key = keys + i * GNOMON_ED25519_KEY_LEN;
      pinned[i].public_key_len = GNOMON_ED25519_KEY_LEN;
      pinned[i].server = (uint32_t)id;
    }
  }

  /* The test's servers answer from an unsynchronized kernel clock with a
   * wide radius: allow 5 minutes (the CLI test's --max-radius). */
  gnomon_proof_policy policy = {2, GNOMON_MAX_LIARS_AUTO, 300000000};
  if (argc > 6 && strcmp(argv[6], "auto") != 0) {
    policy.max_liars = (size_t)strtoull(argv[6], NULL, 10);
  }
  gnomon_proven out;
  paint();
  gnomon_error code =
      grouped ? gnomon_verify_proof_any_key(bundle, bundle_len, device,
                                            device_len, pinned, n_keys,
                                            elapsed_us, &policy, &ws, &out)
              : gnomon_verify_proof(bundle, bundle_len, device, device_len,
                                    keys, n_keys, elapsed_us, &policy, &ws,
                                    &out);
  size_t stack = painted_depth();
  CHECK(out.code == code);
  CHECK(code != GNOMON_OK || out.has_interval);
  CHECK(!out.has_interval || out.earliest_unix_us <= out.latest_unix_us);
  /* The assumption is stated whenever the bundle was judged. */
  CHECK(out.pinned >= 1 || code == GNOMON_ERR_ARGUMENT ||
        code == GNOMON_ERR_EMPTY || code == GNOMON_ERR_TOO_LONG ||
        code == GNOMON_ERR_NULL || code == GNOMON_ERR_KEY);
  /* Only malfeasance carries an interval besides success. */
  CHECK(!out.has_interval || code == GNOMON_OK ||
        code == GNOMON_ERR_PROOF_CONTRADICTION ||
        code == GNOMON_ERR_PROOF_LIAR);

  /* NULL policy: the defaults, which refuse these servers' wide radius
   * (or fail earlier, for a tampered bundle); never success with a
   * wider interval than 10 s. */
  gnomon_proven strict;
  gnomon_error d = gnomon_verify_proof(bundle, bundle_len, device, device_len,
                                       keys, keys_len / GNOMON_ED25519_KEY_LEN,
                                       elapsed_us, NULL, &ws, &strict);
  CHECK(d != GNOMON_OK ||
        strict.latest_unix_us - strict.earliest_unix_us <= 20000000);
  /* A device value one byte short of GNOMON_MIN_DEVICE_VALUE (the first
   * bytes of this one): refused as an argument before the bundle is read,
   * not as a bundle made for another value. */
  if (device_len >= GNOMON_MIN_DEVICE_VALUE) {
    CHECK(gnomon_verify_proof(bundle, bundle_len, device,
                              GNOMON_MIN_DEVICE_VALUE - 1, keys,
                              keys_len / GNOMON_ED25519_KEY_LEN, elapsed_us,
                              &policy, &ws, &strict) == GNOMON_ERR_ARGUMENT);
    CHECK(strict.code == GNOMON_ERR_ARGUMENT && !strict.has_interval);
  }
  /* Argument checks: no keys, no workspace. */
  CHECK(gnomon_verify_proof(bundle, bundle_len, device, device_len, keys, 0,
                            elapsed_us, &policy, &ws, &strict) ==
        GNOMON_ERR_EMPTY);
  CHECK(gnomon_verify_proof(bundle, bundle_len, device, device_len, keys,
                            keys_len / GNOMON_ED25519_KEY_LEN, elapsed_us,
                            &policy, NULL, &strict) == GNOMON_ERR_NULL);
  CHECK(strict.code == GNOMON_ERR_NULL && !strict.has_interval);

  printf("code=%d has_interval=%d earliest=%" PRId64 " latest=%" PRId64
         " agreeing=%zu answering=%zu needed=%zu max_liars=%zu pinned=%zu"
         " entry=%d other=%d liars=%" PRIu32 " stack=%zu\n",
         (int)code, out.has_interval ? 1 : 0, out.earliest_unix_us,
         out.latest_unix_us, out.agreeing_keys, out.answering_keys,
         out.needed_keys, out.max_liars, out.pinned, out.entry, out.other,
         out.liars, stack);
  return 0;
}
