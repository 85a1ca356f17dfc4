/* gnomon_consensus from C: run by tests/c_programs.rs, linked with the
 * release static library under ASan and UBSan, and with the no_std build,
 * whose allocator refuses every request (a call that allocated would
 * never return). Only what a firmware build declares: GNOMON_NO_STD is
 * defined before the header. No server needed: the answers are given.
 * Prints "ok N checks" and exits 0, or names the first failed check. */
#define GNOMON_NO_STD
#include "gnomon.h"

#include "check.h"

#define S 1000000LL

#define EXPECT(call, code)                                                 \
  do {                                                                     \
    gnomon_error got_ = (call);                                            \
    checks++;                                                              \
    if (got_ != (code)) {                                                  \
      fprintf(stderr, "consensus.c:%d: %s gave %d (%s), expected %s\n",    \
              __LINE__, #call, (int)got_, gnomon_error_string(got_),       \
              #code);                                                      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static const uint8_t narrow[32] = {1}, wide[32] = {2}, liar[32] = {3},
                     other[32] = {4}, liar2[32] = {5};

#define AUTO GNOMON_MAX_LIARS_AUTO

int main(void) {
  gnomon_consensus_result r;
  gnomon_verdict v[GNOMON_MAX_ANSWERS];

  /* Issue 21, as in docs/C.md: honest ±16 s and ±60 s, a liar 70 s slow
   * with ±16 s, all three of a list of three (at most 1 lies). The
   * consensus spans both stretches two of them hold, nobody is flagged,
   * and the message says the servers disagree. */
  gnomon_vouch issue21[3] = {
      {narrow, -16 * S, 16 * S},
      {wide, -60 * S, 60 * S},
      {liar, -86 * S, -54 * S},
  };
  EXPECT(gnomon_consensus(issue21, 3, 3, AUTO, 2, v, &r), GNOMON_OK);
  CHECK(r.code == GNOMON_OK && r.has_consensus && r.quorum_met);
  CHECK(r.low_us == -60 * S && r.high_us == 16 * S);
  CHECK(r.midpoint_us == -22 * S && r.radius_us == 38 * S);
  CHECK(r.regions == 2);
  CHECK(r.voting_keys == 3 && r.agreeing_keys == 3 && r.outside_keys == 0);
  CHECK(r.listed == 3 && r.max_liars == 1 && r.needed == 3);
  for (int i = 0; i < 3; i++) CHECK(v[i] == GNOMON_VERDICT_AGREES);
  CHECK(strstr(r.message, "disagree") != NULL);

  /* One key given three times is one vote: the liar, alone, is outside,
   * and the message is the assumption. */
  gnomon_vouch thrice[5] = {
      {narrow, -S, S},          {liar, -71 * S, -69 * S},
      {wide, -S, S},            {liar, -71 * S, -69 * S},
      {liar, -71 * S, -69 * S},
  };
  EXPECT(gnomon_consensus(thrice, 5, 3, AUTO, 2, v, &r), GNOMON_OK);
  CHECK(r.has_consensus && r.low_us == -S && r.high_us == S);
  CHECK(r.voting_keys == 3 && r.agreeing_keys == 2 && r.outside_keys == 1);
  CHECK(r.regions == 1 && r.quorum_met);
  CHECK(strcmp(r.message,
               "assumes at most 1 of the 3 listed servers lies; 3 answered, "
               "3 needed") == 0);
  CHECK(v[0] == GNOMON_VERDICT_AGREES && v[2] == GNOMON_VERDICT_AGREES);
  CHECK(v[1] == GNOMON_VERDICT_OUTSIDE && v[3] == GNOMON_VERDICT_OUTSIDE &&
        v[4] == GNOMON_VERDICT_OUTSIDE);

  /* A key whose own answers do not overlap contradicts itself, does not
   * vote and is the one liar assumed: the two left must both agree. */
  gnomon_vouch self[4] = {
      {liar, 0, 10}, {narrow, 0, 10}, {wide, 5, 15}, {liar, 20, 30}};
  EXPECT(gnomon_consensus(self, 4, 3, AUTO, 2, v, &r), GNOMON_OK);
  CHECK(r.low_us == 5 && r.high_us == 10 && r.voting_keys == 2);
  CHECK(r.contradicting_keys == 1);
  CHECK(v[0] == GNOMON_VERDICT_SELF_CONTRADICTION &&
        v[3] == GNOMON_VERDICT_SELF_CONTRADICTION &&
        v[1] == GNOMON_VERDICT_AGREES);

  /* The drop attack: five listed, the three honest ones silenced, and the
   * two liars' answers all that arrive. Counted as the electorate they
   * were all of it; under "at most 1 of 5 lies" 3 must answer. */
  gnomon_vouch dropped[2] = {{liar, 3599 * S, 3601 * S},
                             {liar2, 3599 * S, 3601 * S}};
  EXPECT(gnomon_consensus(dropped, 2, 5, AUTO, 1, v, &r), GNOMON_OK);
  CHECK(!r.has_consensus && !r.quorum_met && r.regions == 0);
  CHECK(r.voting_keys == 2 && r.needed == 3 && r.max_liars == 1);
  CHECK(v[0] == GNOMON_VERDICT_NO_CONSENSUS &&
        v[1] == GNOMON_VERDICT_NO_CONSENSUS);
  CHECK(strstr(r.message, "too few answered") != NULL);
  CHECK(strstr(r.message, "silenced") != NULL);

  /* Three honest and a liar an hour ahead, of four listed: the liar is
   * named. */
  gnomon_vouch named[4] = {{narrow, -2 * S, 2 * S},
                           {wide, -3 * S, S},
                           {other, -S, 3 * S},
                           {liar, 3599 * S, 3601 * S}};
  EXPECT(gnomon_consensus(named, 4, 4, AUTO, 2, v, &r), GNOMON_OK);
  CHECK(r.has_consensus && r.quorum_met && r.low_us == -S && r.high_us == S);
  CHECK(r.agreeing_keys == 3 && r.outside_keys == 1);
  CHECK(v[3] == GNOMON_VERDICT_OUTSIDE && v[0] == GNOMON_VERDICT_AGREES);

  /* Two that disagree: with no liar assumed no offset is held by both;
   * a list of two cannot outvote the one liar assumed by default. */
  gnomon_vouch split[2] = {{narrow, 0, 10}, {wide, 100, 110}};
  EXPECT(gnomon_consensus(split, 2, 2, 0, 1, v, &r), GNOMON_OK);
  CHECK(!r.has_consensus && !r.quorum_met && r.regions == 0);
  CHECK(v[0] == GNOMON_VERDICT_NO_CONSENSUS &&
        v[1] == GNOMON_VERDICT_NO_CONSENSUS);
  CHECK(strncmp(r.message, "no consensus: no offset", 23) == 0);
  EXPECT(gnomon_consensus(split, 2, 2, AUTO, 1, v, &r), GNOMON_OK);
  CHECK(!r.has_consensus && strstr(r.message, "cannot outvote") != NULL);
  gnomon_vouch one_key[2] = {{other, -S, S}, {other, -S, S}};
  EXPECT(gnomon_consensus(one_key, 2, 1, 0, 2, NULL, &r), GNOMON_OK);
  CHECK(r.has_consensus && !r.quorum_met && r.agreeing_keys == 1);
  CHECK(strstr(r.message, "fewer than the quorum of 2") != NULL);

  /* Arguments. */
  EXPECT(gnomon_consensus(NULL, 3, 3, AUTO, 2, v, &r), GNOMON_ERR_NULL);
  EXPECT(gnomon_consensus(issue21, 3, 3, AUTO, 2, v, NULL), GNOMON_ERR_NULL);
  EXPECT(gnomon_consensus(issue21, 0, 3, AUTO, 2, v, &r), GNOMON_ERR_EMPTY);
  EXPECT(gnomon_consensus(issue21, GNOMON_MAX_ANSWERS + 1, 3, AUTO, 2, v, &r),
         GNOMON_ERR_TOO_LONG);
  EXPECT(gnomon_consensus(issue21, 3, 3, AUTO, 0, v, &r), GNOMON_ERR_ARGUMENT);
  /* listed must count every distinct key that answered, and more. */
  EXPECT(gnomon_consensus(issue21, 3, 2, AUTO, 1, v, &r), GNOMON_ERR_ARGUMENT);
  CHECK(!r.has_consensus && strstr(r.message, "3 distinct keys") != NULL);
  EXPECT(gnomon_consensus(issue21, 3, 0, AUTO, 1, v, &r), GNOMON_ERR_ARGUMENT);
  CHECK(strstr(r.message, "listed is 0") != NULL);
  gnomon_vouch backwards[1] = {{narrow, 1, 0}};
  EXPECT(gnomon_consensus(backwards, 1, 1, AUTO, 1, v, &r),
         GNOMON_ERR_ARGUMENT);
  CHECK(!r.has_consensus && strstr(r.message, "answer 0") != NULL);
  gnomon_vouch keyless[2] = {{narrow, 0, 1}, {NULL, 0, 1}};
  EXPECT(gnomon_consensus(keyless, 2, 2, AUTO, 1, v, &r), GNOMON_ERR_NULL);
  CHECK(strstr(r.message, "answer 1") != NULL);

  printf("ok %d checks\n", checks);
  return 0;
}
