/* gnomon_verify_server_list from C: run by tests/libgnomon/signed_list.rs,
 * linked with the release static library under ASan and UBSan, and with
 * the no_std build, whose allocator refuses every request (a call that
 * allocated would never return). Only what a firmware build declares:
 * GNOMON_NO_STD before the header. The directory given holds what an
 * observatory publishes, signed by OpenSSH's ssh-keygen: monitor.pub,
 * list.json and list.json.sig, and the same list signed by another key
 * (other.sig) and in another namespace (git.sig), a newer list (newer.json,
 * .sig) and one without a valid header (malformed.json, .sig).
 * Prints "ok N checks" and exits 0, or names the first failed check. */
#define GNOMON_NO_STD
#include "gnomon.h"

#include "check.h"

#define NOW 1796220000 /* 2026-12-02T14:00:00Z */
#define DAY 86400

#define EXPECT(call, code)                                                 \
  do {                                                                     \
    gnomon_error got_ = (call);                                            \
    checks++;                                                              \
    if (got_ != (code)) {                                                  \
      fprintf(stderr, "signed_list.c:%d: %s gave %d (%s), expected %s\n",  \
              __LINE__, #call, (int)got_, gnomon_error_string(got_),       \
              #code);                                                      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static size_t slurp(const char *dir, const char *name, uint8_t *buf,
                    size_t cap) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  size_t n = fread(buf, 1, cap, f);
  CHECK(n > 0 && n < cap);
  fclose(f);
  return n;
}

static uint8_t list[8192], sig[4096], other[4096], git[4096], newer[8192],
    newer_sig[4096], bad[8192], bad_sig[4096], changed[8192];

int main(int argc, char **argv) {
  CHECK(argc == 2);
  const char *dir = argv[1];
  char pub[1024];
  size_t pub_len = slurp(dir, "monitor.pub", (uint8_t *)pub, sizeof pub);
  size_t list_len = slurp(dir, "list.json", list, sizeof list);
  size_t sig_len = slurp(dir, "list.json.sig", sig, sizeof sig);
  size_t other_len = slurp(dir, "other.sig", other, sizeof other);
  size_t git_len = slurp(dir, "git.sig", git, sizeof git);
  size_t newer_len = slurp(dir, "newer.json", newer, sizeof newer);
  size_t newer_sig_len = slurp(dir, "newer.json.sig", newer_sig, sizeof newer_sig);
  size_t bad_len = slurp(dir, "malformed.json", bad, sizeof bad);
  size_t bad_sig_len = slurp(dir, "malformed.json.sig", bad_sig, sizeof bad_sig);

  /* The pinned key, from the .pub line as ssh-keygen wrote it. */
  uint8_t key[32];
  EXPECT(gnomon_parse_monitor_key(pub, pub_len, key), GNOMON_OK);
  EXPECT(gnomon_parse_monitor_key("ssh-rsa AAAA", 12, key), GNOMON_ERR_KEY);
  EXPECT(gnomon_parse_monitor_key(NULL, 12, key), GNOMON_ERR_NULL);
  EXPECT(gnomon_parse_monitor_key(pub, pub_len, key), GNOMON_OK);

  gnomon_list_seen seen;
  memset(&seen, 0, sizeof seen);
  gnomon_list_result r;

  /* Accepted: the header, the monitor's name, and seen recorded. */
  EXPECT(gnomon_verify_server_list(list, list_len, sig, sig_len, key, NOW,
                                   &seen, &r),
         GNOMON_OK);
  CHECK(r.code == GNOMON_OK && r.sequence == 57);
  CHECK(r.published_unix == NOW - 60 && r.expires_unix == NOW + DAY);
  CHECK(strcmp(r.monitor, "monitor \"a\"") == 0);
  CHECK(strcmp(r.message, "success") == 0);
  CHECK(seen.present && seen.sequence == 57);
  CHECK(memcmp(seen.sha256, r.sha256, 32) == 0);
  /* The same list fetched again is fine. */
  EXPECT(gnomon_verify_server_list(list, list_len, sig, sig_len, key, NOW,
                                   &seen, &r),
         GNOMON_OK);

  /* One byte changed: refused, naming the key by its fingerprint. */
  memcpy(changed, list, list_len);
  changed[list_len / 2] ^= 0x01;
  EXPECT(gnomon_verify_server_list(changed, list_len, sig, sig_len, key, NOW,
                                   &seen, &r),
         GNOMON_ERR_LIST_SIGNATURE);
  CHECK(r.code == GNOMON_ERR_LIST_SIGNATURE && r.sequence == 0);
  CHECK(strstr(r.message, "does not verify under key SHA256:") != NULL);
  CHECK(strstr(r.message, "fetch both again") != NULL);

  /* Signed by another key, or for git: refused with their own codes. */
  EXPECT(gnomon_verify_server_list(list, list_len, other, other_len, key, NOW,
                                   &seen, &r),
         GNOMON_ERR_LIST_OTHER_KEY);
  CHECK(strstr(r.message, "not by the pinned key SHA256:") != NULL);
  EXPECT(gnomon_verify_server_list(list, list_len, git, git_len, key, NOW,
                                   &seen, &r),
         GNOMON_ERR_LIST_SIGNATURE);

  /* Expired: at its expiry and after. */
  EXPECT(gnomon_verify_server_list(list, list_len, sig, sig_len, key,
                                   NOW + DAY, &seen, &r),
         GNOMON_ERR_LIST_EXPIRED);
  CHECK(strstr(r.message, "expired at 2026-12-03T14:00:00Z (now "
                          "2026-12-03T14:00:00Z)") != NULL);

  /* A newer list is accepted and moves seen on; the older one is then a
   * replay, and seen stays. */
  EXPECT(gnomon_verify_server_list(newer, newer_len, newer_sig, newer_sig_len,
                                   key, NOW, &seen, &r),
         GNOMON_OK);
  CHECK(r.sequence == 58 && seen.sequence == 58);
  EXPECT(gnomon_verify_server_list(list, list_len, sig, sig_len, key, NOW,
                                   &seen, &r),
         GNOMON_ERR_LIST_REPLAYED);
  CHECK(strstr(r.message, "sequence 57 is older than 58") != NULL);
  CHECK(seen.present && seen.sequence == 58);

  /* The sequence seen, over other bytes. */
  gnomon_list_seen reused = seen;
  reused.sequence = 57;
  EXPECT(gnomon_verify_server_list(list, list_len, sig, sig_len, key, NOW,
                                   &reused, &r),
         GNOMON_ERR_LIST_REUSED);
  CHECK(reused.sequence == 57);

  /* Signed, but no valid header. */
  EXPECT(gnomon_verify_server_list(bad, bad_len, bad_sig, bad_sig_len, key,
                                   NOW, &seen, &r),
         GNOMON_ERR_LIST_MALFORMED);
  CHECK(strstr(r.message, "observatory") != NULL);

  /* The arguments. */
  EXPECT(gnomon_verify_server_list(NULL, list_len, sig, sig_len, key, NOW,
                                   &seen, &r),
         GNOMON_ERR_NULL);
  EXPECT(gnomon_verify_server_list(list, 0, sig, sig_len, key, NOW, &seen,
                                   &r),
         GNOMON_ERR_EMPTY);
  EXPECT(gnomon_verify_server_list(list, GNOMON_MAX_SERVER_LIST + 1, sig,
                                   sig_len, key, NOW, &seen, &r),
         GNOMON_ERR_TOO_LONG);
  EXPECT(gnomon_verify_server_list(list, list_len, sig, sig_len, NULL, NOW,
                                   &seen, &r),
         GNOMON_ERR_NULL);
  EXPECT(gnomon_verify_server_list(list, list_len, sig, sig_len, key, NOW,
                                   NULL, &r),
         GNOMON_ERR_NULL);
  EXPECT(gnomon_verify_server_list(list, list_len, sig, sig_len, key, NOW,
                                   &seen, NULL),
         GNOMON_ERR_NULL);
  CHECK(strcmp(gnomon_error_string(GNOMON_ERR_LIST_REPLAYED),
               "the server list is older than one already accepted "
               "(replayed)") == 0);

  printf("ok %d checks\n", checks);
  return 0;
}
