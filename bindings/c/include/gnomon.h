/* gnomon.h: the C interface of libgnomon, gnomon's Roughtime client.
 * Generated from bindings/c/src by cbindgen; do not edit (see docs/C.md).
 * SPDX-License-Identifier: Apache-2.0 OR MIT */

#ifndef GNOMON_H
#define GNOMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* The blocking query and OS randomness exist only in libgnomon built with
 * its default `std` feature; define GNOMON_NO_STD before including this
 * header when linking a build without it (firmware). */
#ifndef GNOMON_NO_STD
#define GNOMON_STD 1
#endif

// Bytes of an Ed25519 long-term public key.
#define GNOMON_ED25519_KEY_LEN 32

// Bytes of an ML-DSA-44 long-term public key (version 0x90000001).
#define GNOMON_ML_DSA_44_KEY_LEN 1312

// Longest long-term public key of any scheme: a buffer this long holds
// whatever `gnomon_parse_public_key_any` decodes.
#define GNOMON_MAX_KEY_LEN 1312

// The experimental post-quantum version, signed with ML-DSA-44: TCP only
// (its answers are about 6.4 KB), 1312-byte keys.
#define GNOMON_VERSION_ML_DSA_44 2415919105

// Bytes of every request libgnomon builds; the `out` buffer of the build
// functions must hold at least this many.
#define GNOMON_REQUEST_SIZE 1024

// Longest input (request, response, previous response) accepted.
#define GNOMON_MAX_INPUT 65536

// Most exchanges `gnomon_check_chain` takes.
#define GNOMON_MAX_CHAIN 1024

// Longest nonce of any version (drafts 01–04).
#define GNOMON_MAX_NONCE 64

// Bytes of the `message` fields, NUL included. A message that would not
// fit (only text you gave, such as a long host name, can make one that
// long) is cut after a whole word and ends in "…" (U+2026).
#define GNOMON_MESSAGE_LEN 256

// RFC 10049, Roughtime version 1.
#define GNOMON_VERSION_RFC 1

// The value IETF drafts 12 to 19 share (the draft-14+ format, with TYPE).
#define GNOMON_VERSION_DRAFT_12_TO_19 2147483660

// Google's original protocol (its number in server lists).
#define GNOMON_VERSION_GOOGLE 3000600613

// `gnomon_query`: the newest version the server speaks.
#define GNOMON_VERSION_AUTO 0

// Longest timeout `gnomon_query` takes, ms (one day).
#define GNOMON_MAX_TIMEOUT_MS 86400000

// Most answers `gnomon_consensus` takes (it keeps what it needs on the
// stack: about 8 KB on a 64-bit machine, 6 KB on a 32-bit one).
#define GNOMON_MAX_ANSWERS 256

// `max_liars` of `gnomon_consensus` and `gnomon_proof_policy`: the
// default assumption. For a consensus, at most max(1, ⌊(listed − 1)/3⌋)
// of the listed servers lie (what `gnomon sync` assumes); for a relayed
// proof, fewer than half of the pinned servers, ⌊(pinned − 1)/2⌋. Any
// other value is the number itself: 0 trusts every server.
#define GNOMON_MAX_LIARS_AUTO (size_t)~0

// `known` of `gnomon_now_result`: nothing is proven.
#define GNOMON_NOW_NONE 0

// `known`: a lower bound only (`gnomon sync` restarted and has had no
// good round since): `earliest_unix_us` is the floor.
#define GNOMON_NOW_FLOOR 1

// `known`: both ends are proven.
#define GNOMON_NOW_INTERVAL 2

// `known`: the last round's interval (`earliest_unix_us` ..
// `latest_unix_us`) lies wholly below the proven floor, so one of the two
// is wrong (a floor planted or proven by liars, or liars in the round):
// nothing is proven, not even a lower bound. The operator decides
// (`gnomon sync --clear-floor`; docs/NOW.md).
#define GNOMON_NOW_CONTRADICTION 3

// Longest key text `parse_key_any` takes: an ML-DSA-44 key is 1752
// characters of base64 or 2624 hex digits, with room for whitespace.
#define MAX_KEY_TEXT 4096



// Bytes of `gnomon_proof_workspace`. One figure for every target, so
// that one header serves them all: the Rust workspace (about 2.5 KB on
// a 64-bit target, less on a 32-bit one) plus room to align it, checked
// at compile time for the target libgnomon is built for.
#define GNOMON_PROOF_WORKSPACE_SIZE 3072

// Most pinned keys `gnomon_verify_proof` takes (it keeps them on the
// stack).
#define GNOMON_MAX_PROOF_KEYS 32

// Most entries a bundle carries (format version 1).
#define GNOMON_MAX_PROOF_ENTRIES 16

// Longest device value D.
#define GNOMON_MAX_DEVICE_VALUE 64

// Shortest device value D: 16 bytes, at least 128 bits of them the relay
// cannot predict (fresh random bytes; a counter or a clock reading lets a
// relay prepare bundles in advance).
#define GNOMON_MIN_DEVICE_VALUE 16

// Longest bundle of format version 1: D of 64 bytes and 16 entries, each
// an ML-DSA-44 key, a 64-byte rand, a whole 1024-byte request and a
// 65535-byte response. Longer ones are `GNOMON_ERR_TOO_LONG`.
#define GNOMON_MAX_PROOF_BUNDLE 1087175

// No entry: `entry` and `other` of a `gnomon_proven` that names none.
#define GNOMON_NO_ENTRY -1

// Longest list document `gnomon_verify_server_list` reads (4 MiB: a few
// thousand servers with what a monitor measured of each).
#define GNOMON_MAX_SERVER_LIST ((4 * 1024) * 1024)

// Longest armored signature it reads (an Ed25519 one is under 300 bytes).
#define GNOMON_MAX_LIST_SIGNATURE 4096

// Bytes of `gnomon_list_result`'s `monitor`, NUL included.
#define GNOMON_MONITOR_NAME_LEN 128

// What a libgnomon call returns: `GNOMON_OK` (0) or why it failed. The
// values are part of the ABI and never change; new failures get new
// numbers.
typedef enum gnomon_error {
  // Success.
  GNOMON_OK = 0,
  // A required pointer was NULL.
  GNOMON_ERR_NULL = 1,
  // A required input was empty (length 0).
  GNOMON_ERR_EMPTY = 2,
  // An input is longer than any Roughtime message can be (65536 bytes),
  // a chain has more than `GNOMON_MAX_CHAIN` exchanges, or a consensus
  // more than `GNOMON_MAX_ANSWERS` answers.
  GNOMON_ERR_TOO_LONG = 3,
  // The output buffer is too small (a request needs `GNOMON_REQUEST_SIZE`).
  GNOMON_ERR_BUFFER_TOO_SMALL = 4,
  // No protocol version with this number is known.
  GNOMON_ERR_UNKNOWN_VERSION = 5,
  // The nonce (or chain rand) is not as long as the version requires.
  GNOMON_ERR_NONCE_LENGTH = 6,
  // The public key is no scheme's: its length is neither 32 (Ed25519)
  // nor 1312 (ML-DSA-44) bytes, or its text is not base64 or hex of
  // one (or, for the 32-byte functions, not an Ed25519 key).
  GNOMON_ERR_KEY = 7,
  // The request given to verify does not parse.
  GNOMON_ERR_REQUEST = 8,
  // The response is malformed: framing, tags, or a missing field.
  GNOMON_ERR_MALFORMED = 9,
  // The response's version is unknown, was not offered, or is encoded
  // where or how that version does not allow (TYPE, VERS).
  GNOMON_ERR_VERSION = 10,
  // The response names a better version both sides speak: a downgrade.
  GNOMON_ERR_DOWNGRADE = 11,
  // The delegation is not signed by this public key (wrong key, a key
  // of the other scheme than the version answered, or a forged
  // certificate).
  GNOMON_ERR_DELEGATION_SIGNATURE = 12,
  // The signed response is not signed by the delegated online key.
  GNOMON_ERR_RESPONSE_SIGNATURE = 13,
  // The response does not carry the request's nonce.
  GNOMON_ERR_NONCE = 14,
  // The Merkle path does not lead from the request to the signed root.
  GNOMON_ERR_MERKLE = 15,
  // A time is undecodable, outside the delegation, or a zero radius
  // where the version forbids it.
  GNOMON_ERR_TIME = 16,
  // A chained request's nonce is not derived from the previous response
  // and its rand.
  GNOMON_ERR_CHAIN_NONCE = 17,
  // Two responses of a chain contradict each other: the earlier one's
  // earliest time is after the later one's latest (malfeasance).
  GNOMON_ERR_CAUSALITY = 18,
  // The address is not HOST:PORT, or the host does not resolve.
  GNOMON_ERR_ADDRESS = 19,
  // No answer came before the timeout. A server that drops requests
  // looks like this, and servers drop requests that name another key
  // than theirs: check the public key as well as the address.
  GNOMON_ERR_TIMEOUT = 20,
  // A local failure: no socket, or the operating system's random
  // source failed.
  GNOMON_ERR_LOCAL = 21,
  // An argument is out of range: a timeout of 0, text that is not
  // UTF-8, a misaligned struct pointer, a quorum of 0, a consensus
  // `listed` of 0 or below the distinct keys answering, an answer whose
  // low offset is above its high one.
  GNOMON_ERR_ARGUMENT = 22,
  // A bug in libgnomon was caught before it could reach the caller
  // (a Rust panic, in a build that unwinds); a result struct carries
  // only the code and message, other outputs are not to be used.
  GNOMON_ERR_INTERNAL = 23,
  // Nothing listens at the address: UDP met an ICMP "port unreachable"
  // (and TCP, where tried, was refused). Check the port and that the
  // server runs; a wrong key is silence (`GNOMON_ERR_TIMEOUT`), not this.
  GNOMON_ERR_REFUSED = 24,
  // A relayed proof was made for another device value: another device's, or
  // replayed from an earlier request.
  GNOMON_ERR_PROOF_WRONG_NONCE = 25,
  // A relayed proof's first request is not bound to the device value (a
  // chain that starts elsewhere).
  GNOMON_ERR_PROOF_BINDING = 26,
  // An entry of a relayed proof is signed by a key the device does not pin
  // (`entry`).
  GNOMON_ERR_PROOF_UNKNOWN_KEY = 27,
  // An entry's delegation or response signature does not verify (`entry`):
  // forged bytes.
  GNOMON_ERR_PROOF_SIGNATURE = 28,
  // An entry's response answers another request (`entry`): a swapped or
  // transplanted answer.
  GNOMON_ERR_PROOF_NOT_FOR_REQUEST = 29,
  // An entry's response fails verification otherwise (`entry`): malformed,
  // another version, a time outside its delegation.
  GNOMON_ERR_PROOF_RESPONSE = 30,
  // An entry's request is not chained from the response before it (`entry`):
  // a changed rand, a dropped, repeated or reordered entry.
  GNOMON_ERR_PROOF_LINK = 31,
  // Two answers of a relayed proof cannot both be true (`entry` and
  // `other`): a server lied, and the bundle proves it. The proven
  // interval is given when there is one and it meets the policy
  // (`has_interval`).
  GNOMON_ERR_PROOF_CONTRADICTION = 32,
  // Keys of a relayed proof miss the proven interval or contradict
  // themselves (`liars`): under the assumption they lie. The interval
  // is given when it meets the policy (`has_interval`).
  GNOMON_ERR_PROOF_LIAR = 33,
  // A relayed proof carries fewer distinct pinned servers than
  // 2 × max_liars + 1 (`answering_keys`, `needed_keys`): the relay left
  // the others out, or they did not answer it, and what is left may be
  // the liars.
  GNOMON_ERR_PROOF_TOO_FEW_KEYS = 34,
  // No time is held by all but `max_liars` of the servers a relayed
  // proof carries (more of them lie than assumed), or fewer agree than
  // the policy's quorum.
  GNOMON_ERR_PROOF_NO_QUORUM = 35,
  // The interval a relayed proof gives is wider than the policy's
  // `max_radius_us` (`radius_us`).
  GNOMON_ERR_PROOF_TOO_WIDE = 36,
  // A length in a relayed proof runs past its end.
  GNOMON_ERR_PROOF_TRUNCATED = 37,
  // A relayed proof's structure is wrong: magic, format version, a count or
  // length out of range, an untrimmed request, trailing bytes.
  GNOMON_ERR_PROOF_MALFORMED = 38,
  // A signed server list's signature does not verify under the pinned
  // monitor key: the list was changed after it was signed, the signature
  // is another's, or it was made for another namespace than
  // `roughtime-server-list`.
  GNOMON_ERR_LIST_SIGNATURE = 39,
  // A signed server list carries a valid signature by a key other than
  // the pinned one.
  GNOMON_ERR_LIST_OTHER_KEY = 40,
  // A signed server list has expired (`now_unix` is at or past its
  // `observatory.expires`).
  GNOMON_ERR_LIST_EXPIRED = 41,
  // A signed server list's sequence is below the last one accepted from
  // its key: an old list served again.
  GNOMON_ERR_LIST_REPLAYED = 42,
  // A signed server list has the sequence last accepted from its key,
  // over other bytes.
  GNOMON_ERR_LIST_REUSED = 43,
  // A signed server list is not JSON with `servers` and a valid
  // `observatory` header.
  GNOMON_ERR_LIST_MALFORMED = 44,
} gnomon_error;

// What the quorum rule says of one answer (`gnomon_consensus`).
typedef enum gnomon_verdict {
  // Its key's interval meets the consensus.
  GNOMON_VERDICT_AGREES = 0,
  // Its key's interval misses the consensus: if at most `max_liars` of
  // the listed servers lie, this one does.
  GNOMON_VERDICT_OUTSIDE = 1,
  // Its key's answers do not overlap each other: the key lied, proven by
  // its own signatures. It does not vote, and is one of the liars the
  // assumption allows.
  GNOMON_VERDICT_SELF_CONTRADICTION = 2,
  // There is no consensus to meet or miss.
  GNOMON_VERDICT_NO_CONSENSUS = 3,
} gnomon_verdict;

// The outcome of `gnomon_verify` and `gnomon_query`.
typedef struct gnomon_result {
  // `GNOMON_OK`, or why not; the same value the call returned.
  enum gnomon_error code;
  // The version the server answered in (wire value; Google's is
  // `GNOMON_VERSION_GOOGLE`); 0 on failure.
  uint32_t version;
  // The server's time, microseconds since the Unix epoch (UTC, leap
  // seconds smeared or not as the server does); 0 on failure.
  uint64_t midpoint_us;
  // The server vouches for midpoint ± radius, microseconds.
  uint64_t radius_us;
  // A NUL-terminated English sentence: "success", or what was wrong.
  char message[GNOMON_MESSAGE_LEN];
} gnomon_result;

// One request/response pair of a chain, as `gnomon_exchange` but with the
// key's length, so that a chain may hold ML-DSA-44 exchanges.
typedef struct gnomon_exchange_any_key {
  // The request as sent.
  const uint8_t *request;
  // Its length.
  size_t request_len;
  // The response as received.
  const uint8_t *response;
  // Its length.
  size_t response_len;
  // The rand the request's nonce was chained with
  // (`gnomon_chain_nonce`); NULL and 0 for the first exchange.
  const uint8_t *rand;
  // Its length: the nonce length of the request's version.
  size_t rand_len;
  // The server's long-term public key.
  const uint8_t *public_key;
  // Its length: `GNOMON_ED25519_KEY_LEN` or `GNOMON_ML_DSA_44_KEY_LEN`.
  size_t public_key_len;
} gnomon_exchange_any_key;

// The outcome of `gnomon_check_chain`.
typedef struct gnomon_chain_result {
  // `GNOMON_OK`, or why not; the same value the call returned.
  enum gnomon_error code;
  // The exchange that failed (for `GNOMON_ERR_CAUSALITY`, the later of
  // the two); 0 on success.
  size_t index;
  // For `GNOMON_ERR_CAUSALITY`, the earlier exchange it contradicts;
  // otherwise equal to `index`.
  size_t other;
  // A NUL-terminated English sentence.
  char message[GNOMON_MESSAGE_LEN];
} gnomon_chain_result;

// One answer for `gnomon_consensus_any_key`: as `gnomon_vouch`, with the
// key's length.
typedef struct gnomon_vouch_any_key {
  // The server's long-term public key. Votes count per distinct key
  // (the same bytes under two names is one voter).
  const uint8_t *public_key;
  // Its length: `GNOMON_ED25519_KEY_LEN` or `GNOMON_ML_DSA_44_KEY_LEN`.
  size_t public_key_len;
  // Smallest offset, µs.
  int64_t low_us;
  // Largest offset, µs (not below `low_us`).
  int64_t high_us;
} gnomon_vouch_any_key;

// The outcome of `gnomon_consensus`. On a failure only `code` and
// `message` are set (the rest is 0 and false).
typedef struct gnomon_consensus_result {
  // `GNOMON_OK`, or why not; the same value the call returned.
  enum gnomon_error code;
  // Enough distinct keys answered (`needed`) and some offset is held by
  // all of them but `max_liars`.
  bool has_consensus;
  // There is a consensus and at least `quorum` distinct keys meet it.
  bool quorum_met;
  // The consensus: the smallest offset (server − local, µs) held by
  // `voting_keys − max_liars` keys ...
  int64_t low_us;
  // ... and the largest. Add an offset in it to local time.
  int64_t high_us;
  // The middle of the consensus.
  int64_t midpoint_us;
  // Half its width: compare it with the accuracy you need. Liars beside
  // a wide honest interval can make it wide, never wrong.
  int64_t radius_us;
  // Distinct keys that vote (answered and did not contradict themselves).
  size_t voting_keys;
  // Voting keys whose interval meets the consensus.
  size_t agreeing_keys;
  // Voting keys whose interval misses it.
  size_t outside_keys;
  // Keys whose own answers do not overlap (they do not vote, and count
  // against `max_liars`).
  size_t contradicting_keys;
  // Separate stretches of offsets held by `voting_keys − max_liars`
  // keys. More than one: the servers disagree, and the consensus spans
  // them all.
  size_t regions;
  // The assumption: how many distinct servers the list has (as passed).
  size_t listed;
  // ... and how many of them may lie (`GNOMON_MAX_LIARS_AUTO` resolved
  // to its number).
  size_t max_liars;
  // Distinct keys that must answer for a consensus: 2 × max_liars + 1.
  // Fewer answering is no consensus, whatever they say: whoever is
  // silent may have been silenced, and those left may be the liars.
  size_t needed;
  // A NUL-terminated English sentence. With a consensus, the quorum met
  // and the servers not disagreeing, the assumption: "assumes at most 1
  // of the 5 listed servers lies; 3 answered, 3 needed"; otherwise which
  // of those is not so, why there is no consensus, or why the call
  // failed.
  char message[GNOMON_MESSAGE_LEN];
} gnomon_consensus_result;

// One request/response pair of a chain, as the caller recorded it.
typedef struct gnomon_exchange {
  // The request as sent.
  const uint8_t *request;
  // Its length.
  size_t request_len;
  // The response as received.
  const uint8_t *response;
  // Its length.
  size_t response_len;
  // The rand the request's nonce was chained with
  // (`gnomon_chain_nonce`); NULL and 0 for the first exchange.
  const uint8_t *rand;
  // Its length: the nonce length of the request's version.
  size_t rand_len;
  // The server's long-term public key, 32 bytes.
  const uint8_t *public_key;
} gnomon_exchange;

// One answer for `gnomon_consensus`: the server's long-term key and the
// interval of offsets (server time − local time, µs) the answer vouches
// for, typically midpoint − local ± (radius + round trip / 2).
typedef struct gnomon_vouch {
  // The server's long-term public key, 32 bytes. Votes count per
  // distinct key: the same key under two names or addresses is one
  // server.
  const uint8_t *public_key;
  // Smallest offset, µs.
  int64_t low_us;
  // Largest offset, µs (not below `low_us`).
  int64_t high_us;
} gnomon_vouch;

#if defined(GNOMON_STD)
// What `gnomon_now` learnt from `gnomon sync` (docs/NOW.md describes each
// member of the answer these come from).
typedef struct gnomon_now_result {
  // `GNOMON_OK`, or why not; the same value the call returned.
  enum gnomon_error code;
  // `GNOMON_NOW_NONE`, `GNOMON_NOW_FLOOR`, `GNOMON_NOW_INTERVAL` or
  // `GNOMON_NOW_CONTRADICTION`.
  int32_t known;
  // The earliest the time can be now, µs since the Unix epoch (the
  // floor for `GNOMON_NOW_FLOOR`; 0 for `GNOMON_NOW_NONE`).
  int64_t earliest_unix_us;
  // The latest it can be (`GNOMON_NOW_INTERVAL` only; else 0).
  int64_t latest_unix_us;
  // The round of `gnomon sync` that proved it, counted from 1 since sync
  // started (`GNOMON_NOW_INTERVAL` only; else 0).
  uint64_t round;
  // Seconds (boot clock) since that round ended.
  double age_s;
  // How many servers agreed in that round.
  uint32_t servers;
  // The wall clock as sync read it for this answer, Unix µs.
  int64_t wall_clock_unix_us;
  // 1 when that wall clock lies inside what is known, 0 when not, -1
  // when nothing is known.
  int32_t wall_clock_inside;
  // The drift bound the interval is widened by, ppm.
  uint32_t drift_ppm;
  // NUL-terminated: why the call failed, or "ok".
  char message[GNOMON_MESSAGE_LEN];
} gnomon_now_result;
#endif

// What the device accepts (`gnomon_verify_proof`'s `policy`; NULL takes
// the defaults: quorum 1, max_liars `GNOMON_MAX_LIARS_AUTO`,
// max_radius_us 10 000 000).
//
// The assumption is about the pinned servers: at most `max_liars` of
// them lie. The relay chooses which answers the bundle carries (and may
// work with the liars), so a bundle proves an interval only when it
// carries `2 × max_liars + 1` distinct pinned servers, and the interval
// is the hull of the times held by all of them but `max_liars`. With the
// default and n pinned servers that is every one (n odd) or all but one
// (n even). A zeroed policy assumes no liar at all: set `max_liars`.
typedef struct gnomon_proof_policy {
  // Distinct pinned servers whose intervals must meet the proven
  // interval (at least 1; beyond what the rule already needs).
  size_t quorum;
  // How many of the pinned servers may lie; `GNOMON_MAX_LIARS_AUTO`:
  // fewer than half of them, ⌊(pinned − 1)/2⌋ (docs/PROOF.md, "The
  // assumption"). 0 trusts every pinned server.
  size_t max_liars;
  // Widest proven interval accepted, as half its width in µs; 0: no
  // limit.
  uint64_t max_radius_us;
} gnomon_proof_policy;

// The memory `gnomon_verify_proof` works in: declare one (static, or on
// the stack: `GNOMON_PROOF_WORKSPACE_SIZE` bytes) and pass it to every
// call. Its contents need no initialising and mean nothing between
// calls; one workspace serves one call at a time. Any alignment will
// do: libgnomon places its state at the first suitably aligned byte.
typedef struct gnomon_proof_workspace {
  // Opaque.
  uint8_t opaque[GNOMON_PROOF_WORKSPACE_SIZE];
} gnomon_proof_workspace;

// What `gnomon_verify_proof` proved, or why not.
//
// On `GNOMON_OK`, `has_interval` is true and the interval holds the
// device's present. On `GNOMON_ERR_PROOF_CONTRADICTION` and
// `GNOMON_ERR_PROOF_LIAR` (the bundle proves a server lied),
// `has_interval` is true when the majority's interval still meets the
// policy, and the interval is that one: the device may use it. On every
// other failure `has_interval` is false and the times are 0.
typedef struct gnomon_proven {
  // `GNOMON_OK`, or why not; the same value the call returned.
  enum gnomon_error code;
  // Whether `earliest_unix_us` and `latest_unix_us` are an interval.
  bool has_interval;
  // The earliest the device's present can be, µs since the Unix epoch.
  int64_t earliest_unix_us;
  // The latest it can be.
  int64_t latest_unix_us;
  // Distinct pinned servers (voters) whose intervals meet the proven
  // interval (with an interval).
  size_t agreeing_keys;
  // Distinct pinned servers that answered (one contradicting itself
  // excluded; with an interval). For `GNOMON_ERR_PROOF_TOO_FEW_KEYS`:
  // the servers the bundle carries; for `GNOMON_ERR_PROOF_NO_QUORUM`:
  // the servers agreeing.
  size_t answering_keys;
  // For `GNOMON_ERR_PROOF_TOO_FEW_KEYS`: 2 × max_liars + 1, the servers
  // the bundle had to carry; for `GNOMON_ERR_PROOF_NO_QUORUM`: how many
  // had to agree; else 0.
  size_t needed_keys;
  // The assumption the bundle was judged under: at most `max_liars`
  // of the `pinned` servers lie (the policy's number, or
  // `GNOMON_MAX_LIARS_AUTO` resolved). Set whenever the arguments were
  // accepted, success or not; else 0.
  size_t max_liars;
  // Distinct pinned servers (voters: keys grouped by `server`).
  size_t pinned;
  // The entry (0-based) the failure names: the unknown key, the bad
  // signature, the answer for another request, the broken link, the
  // earlier of two contradicting answers; else `GNOMON_NO_ENTRY`.
  int32_t entry;
  // For `GNOMON_ERR_PROOF_CONTRADICTION`, the later of the two answers;
  // else `GNOMON_NO_ENTRY`.
  int32_t other;
  // For `GNOMON_ERR_PROOF_LIAR`: bit i set for each entry i signed by a
  // key that lies; else 0.
  uint32_t liars;
  // For `GNOMON_ERR_PROOF_TOO_WIDE`: the radius, µs; else 0.
  uint64_t radius_us;
} gnomon_proven;

// One pinned key of either scheme (`gnomon_verify_proof_any_key`).
typedef struct gnomon_pinned_key {
  // The long-term public key: 32 (Ed25519) or 1312 (ML-DSA-44) bytes.
  const uint8_t *public_key;
  // Its length.
  size_t public_key_len;
  // Which server the key is: pinned keys with the same non-zero
  // `server` are one voter (one machine's Ed25519 and ML-DSA-44
  // identities, or one operator's servers), so one liar never counts
  // twice. 0: a server of its own. The same key pinned twice is one
  // voter whatever its `server`.
  uint32_t server;
} gnomon_pinned_key;

// The last list accepted from one monitor key: what
// `gnomon_verify_server_list` reads and, on success, updates. Keep one per
// pinned key across restarts (in flash, a file): without it an older list
// served again cannot be told from the current one.
typedef struct gnomon_list_seen {
  // Whether a list from this key was accepted before (a zeroed struct:
  // none). Any non-zero byte reads as true.
  bool present;
  // Its `observatory.sequence`.
  uint64_t sequence;
  // SHA-256 of its document: the same sequence over other bytes is
  // refused as reused.
  uint8_t sha256[32];
} gnomon_list_seen;

// The outcome of `gnomon_verify_server_list`. On a failure only `code`
// and `message` are set (the rest is zero).
typedef struct gnomon_list_result {
  // `GNOMON_OK`, or why not; the same value the call returned.
  enum gnomon_error code;
  // `observatory.sequence`.
  uint64_t sequence;
  // `observatory.published`, Unix seconds.
  int64_t published_unix;
  // `observatory.expires`, Unix seconds: check again before then.
  int64_t expires_unix;
  // SHA-256 of the document.
  uint8_t sha256[32];
  // `observatory.monitor`, UTF-8, NUL-terminated (cut at a character
  // boundary if longer than the field).
  char monitor[GNOMON_MONITOR_NAME_LEN];
  // A NUL-terminated English sentence: "success", or what was refused
  // (naming the key by its `SHA256:` fingerprint) and what to do.
  char message[GNOMON_MESSAGE_LEN];
} gnomon_list_result;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// `gnomon_build_request` with a key of either length: with `public_key`
// (may be NULL) of `public_key_len` bytes (32 or 1312), the request names
// it in SRV (a hash of the whole key) where the version defines SRV, as
// 0x90000001 does. A length of no scheme's key is `GNOMON_ERR_KEY`.
//
// # Safety
// Every non-NULL pointer points to as many bytes as its length says;
// `written` to a writable `size_t`.
enum gnomon_error gnomon_build_request_any_key(uint32_t version,
                                               const uint8_t *nonce,
                                               size_t nonce_len,
                                               const uint8_t *public_key,
                                               size_t public_key_len,
                                               uint8_t *out,
                                               size_t out_len,
                                               size_t *written);

#if defined(GNOMON_STD)
// `gnomon_build_request_any_key` with a nonce from the operating system's
// random source (`std` builds only).
//
// # Safety
// As `gnomon_build_request_any_key`.
enum gnomon_error gnomon_build_request_random_any_key(uint32_t version,
                                                      const uint8_t *public_key,
                                                      size_t public_key_len,
                                                      uint8_t *out,
                                                      size_t out_len,
                                                      size_t *written);
#endif

// `gnomon_verify` against a long-term `public_key` of either scheme:
// `public_key_len` 32 (Ed25519) or 1312 (ML-DSA-44); the key's length
// decides the scheme, and an answer signed with the other scheme fails
// (`GNOMON_ERR_DELEGATION_SIGNATURE`). Another length is
// `GNOMON_ERR_KEY`. An ML-DSA-44 response is about 6.4 KB.
//
// # Safety
// Every non-NULL pointer points to as many bytes as its length says;
// `result` to a writable, aligned `gnomon_result`.
enum gnomon_error gnomon_verify_any_key(const uint8_t *request,
                                        size_t request_len,
                                        const uint8_t *response,
                                        size_t response_len,
                                        const uint8_t *public_key,
                                        size_t public_key_len,
                                        struct gnomon_result *result);

#if defined(GNOMON_STD)
// `gnomon_query` with a key of either scheme (`public_key_len` 32 or
// 1312). An ML-DSA-44 key is asked in 0x90000001, over TCP (the
// version's only transport); `GNOMON_VERSION_AUTO` offers the versions
// of the key's scheme. `std` builds only.
//
// # Safety
// `address` is NULL or a NUL-terminated string; `public_key` NULL or
// `public_key_len` readable bytes; `result` to a writable, aligned
// `gnomon_result`.
enum gnomon_error gnomon_query_any_key(const char *address,
                                       const uint8_t *public_key,
                                       size_t public_key_len,
                                       uint32_t version,
                                       uint32_t timeout_ms,
                                       struct gnomon_result *result);
#endif

// `gnomon_parse_public_key` for keys of either scheme: decode the base64
// or hex in the NUL-terminated `text` (an ML-DSA-44 key is 1752
// characters of base64, 2624 hex digits; at most 4096 characters are
// taken) into `out`, which holds `out_len` bytes (`GNOMON_MAX_KEY_LEN`
// is always enough), and store the key's length (32 or 1312) in
// `*written`: pass both on as `public_key` and `public_key_len`.
//
// # Safety
// `text` is NULL or NUL-terminated; `out` NULL or `out_len` writable
// bytes; `written` NULL or a writable `size_t`.
enum gnomon_error gnomon_parse_public_key_any(const char *text,
                                              uint8_t *out,
                                              size_t out_len,
                                              size_t *written);

// `gnomon_check_chain` over exchanges whose keys may be of either scheme
// (each with its own `public_key_len`): a chain may mix Ed25519 and
// ML-DSA-44 servers.
//
// # Safety
// `exchanges` is NULL or points to `count` aligned
// `gnomon_exchange_any_key` values whose pointers each satisfy
// `gnomon_verify_any_key`'s rules; `result` to a writable, aligned
// `gnomon_chain_result`.
enum gnomon_error gnomon_check_chain_any_key(const struct gnomon_exchange_any_key *exchanges,
                                             size_t count,
                                             struct gnomon_chain_result *result);

// `gnomon_consensus` over answers whose keys may be of either scheme
// (each with its own `public_key_len`). Keys of different lengths are
// always different keys: a machine with an Ed25519 and an ML-DSA-44
// identity is two voters unless you merge them (docs/C.md, "Whom to
// believe").
//
// # Safety
// `answers` is NULL or points to `count` aligned `gnomon_vouch_any_key`
// values, each with a `public_key` that is NULL or points to
// `public_key_len` readable bytes; `verdicts` is NULL or points to
// `count` writable, aligned `gnomon_verdict` values; `result` to a
// writable, aligned `gnomon_consensus_result`. None of them changes
// during the call.
enum gnomon_error gnomon_consensus_any_key(const struct gnomon_vouch_any_key *answers,
                                           size_t count,
                                           size_t listed,
                                           size_t max_liars,
                                           size_t quorum,
                                           enum gnomon_verdict *verdicts,
                                           struct gnomon_consensus_result *result);

// A fixed sentence for `code`, NUL-terminated, never NULL. Values that
// are no code give "unknown error code". The string is static: do not
// free it.
const char *gnomon_error_string(int32_t code);

// Store in `*nonce_len` the nonce length of `version`'s requests (32 or
// 64 bytes).
//
// # Safety
// `nonce_len` is NULL or points to a writable `size_t`.
enum gnomon_error gnomon_nonce_length(uint32_t version, size_t *nonce_len);

// Build a `GNOMON_REQUEST_SIZE`-byte request for `version` with the
// caller's `nonce` (`gnomon_nonce_length` bytes, unpredictable: from a
// hardware random source, or `gnomon_chain_nonce`) into `out`, and store
// its length in `*written`. With `public_key` (32 bytes, may be NULL) the
// request names the server's key in SRV where the version defines it.
// Ed25519 keys only: `gnomon_build_request_any_key` takes ML-DSA-44's.
//
// # Safety
// Every non-NULL pointer points to as many bytes as its length says
// (`public_key`: 32); `written` to a writable `size_t`.
enum gnomon_error gnomon_build_request(uint32_t version,
                                       const uint8_t *nonce,
                                       size_t nonce_len,
                                       const uint8_t *public_key,
                                       uint8_t *out,
                                       size_t out_len,
                                       size_t *written);

#if defined(GNOMON_STD)
// `gnomon_build_request` with a nonce from the operating system's
// random source (`std` builds only).
// Ed25519 keys only: `gnomon_build_request_random_any_key` takes
// ML-DSA-44's.
//
// # Safety
// As `gnomon_build_request`.
enum gnomon_error gnomon_build_request_random(uint32_t version,
                                              const uint8_t *public_key,
                                              uint8_t *out,
                                              size_t out_len,
                                              size_t *written);
#endif

// The nonce of the next request of a measurement sequence (RFC 10049
//), in `version`'s format: derived from the previous response as
// received and a fresh random `rand` of `gnomon_nonce_length` bytes.
// Writes the nonce to `out` (at least that long) and its length to
// `*written`; pass it to `gnomon_build_request`, and keep `rand` for
// `gnomon_check_chain`.
//
// # Safety
// Every non-NULL pointer points to as many bytes as its length says;
// `written` to a writable `size_t`.
enum gnomon_error gnomon_chain_nonce(uint32_t version,
                                     const uint8_t *previous_response,
                                     size_t previous_len,
                                     const uint8_t *rand,
                                     size_t rand_len,
                                     uint8_t *out,
                                     size_t out_len,
                                     size_t *written);

// Verify `response` (as received) to `request` (as sent) against the
// server's 32-byte long-term `public_key`: the delegation's and the
// response's signatures, the Merkle proof of the request's nonce, the
// version negotiation (no downgrade), the midpoint inside the delegation.
// Fills `*result` on every path where `result` is usable and returns the
// same code. What the caller must still do: see docs/C.md.
// Ed25519 keys only: `gnomon_verify_any_key` verifies ML-DSA-44 answers.
//
// # Safety
// Every non-NULL pointer points to as many bytes as its length says
// (`public_key`: 32); `result` to a writable, aligned `gnomon_result`.
enum gnomon_error gnomon_verify(const uint8_t *request,
                                size_t request_len,
                                const uint8_t *response,
                                size_t response_len,
                                const uint8_t *public_key,
                                struct gnomon_result *result);

#if defined(GNOMON_STD)
// Ask `address` ("host:port", NUL-terminated; IPv6 as "[::1]:port")
// once over UDP (and TCP for versions that define it), in `version`
// (`GNOMON_VERSION_AUTO`: the newest the server speaks), verify the answer
// against the 32-byte `public_key`, and fill `*result`. Blocks at most
// `timeout_ms` (1 ms to one day), name resolution included. `std` builds
// only.
// Ed25519 keys only: `gnomon_query_any_key` takes ML-DSA-44's.
//
// # Safety
// `address` is NULL or a NUL-terminated string; `public_key` NULL or 32
// readable bytes; `result` to a writable, aligned `gnomon_result`.
enum gnomon_error gnomon_query(const char *address,
                               const uint8_t *public_key,
                               uint32_t version,
                               uint32_t timeout_ms,
                               struct gnomon_result *result);
#endif

// Decode a long-term public key written in base64 (as server lists and
// `gnomon keygen` print it) or as 64 hex digits, from the NUL-terminated
// `text` into the 32 bytes at `out`.
// Ed25519 keys only (other text is `GNOMON_ERR_KEY`, or
// `GNOMON_ERR_TOO_LONG` past 1024 characters):
// `gnomon_parse_public_key_any` decodes ML-DSA-44's too.
//
// # Safety
// `text` is NULL or NUL-terminated; `out` NULL or 32 writable bytes.
enum gnomon_error gnomon_parse_public_key(const char *text, uint8_t *out);

// Check a measurement sequence: `exchanges[0..count]` in the order the
// responses were received. Every response must verify against its
// request and key, every request after the first must carry the nonce
// `gnomon_chain_nonce` gives for the previous response and its `rand`,
// and no two responses may contradict each other (the earlier one's
// midpoint − radius after the later one's midpoint + radius). Stops at
// the first failure and says which exchange in `*result`.
// Ed25519 keys only: `gnomon_check_chain_any_key` takes
// `gnomon_exchange_any_key`, which carries each key's length.
//
// # Safety
// `exchanges` is NULL or points to `count` aligned `gnomon_exchange`
// values whose pointers each satisfy `gnomon_verify`'s rules; `result`
// to a writable, aligned `gnomon_chain_result`.
enum gnomon_error gnomon_check_chain(const struct gnomon_exchange *exchanges,
                                     size_t count,
                                     struct gnomon_chain_result *result);

// The quorum rule over `answers[0..count]` (at most
// `GNOMON_MAX_ANSWERS`), the same rule as `gnomon sync`, `gnomon query
// --servers` and the Python package, under the assumption that at most
// `max_liars` of the `listed` distinct servers of your list lie
// (`GNOMON_MAX_LIARS_AUTO`: max(1, ⌊(listed − 1)/3⌋)). `listed` counts
// every server of the list, answered or not: an attacker on the path
// chooses who answers, so the rule never takes the answers as the
// electorate. The answers of each distinct key are intersected (an empty
// intersection: the key contradicted itself, does not vote, and is one
// of the liars); with `m` keys voting there is a consensus only when
// `m ≥ 2 × max_liars + 1`, and it is the hull of every offset held by
// `m − max_liars` of them; a key whose interval misses it lies, under
// the assumption. Fills `*result`, and, when `verdicts` is not NULL,
// `verdicts[i]` for each answer. Returns `GNOMON_OK` whenever the
// answers could be judged, consensus or not; `GNOMON_ERR_ARGUMENT` for
// a `listed` of 0 or below the distinct keys answering, or a `quorum`
// of 0. Allocates nothing (also in the `no_std` build).
// Ed25519 keys only: `gnomon_consensus_any_key` takes
// `gnomon_vouch_any_key`, which carries each key's length.
//
// # Safety
// `answers` is NULL or points to `count` aligned `gnomon_vouch` values,
// each with a `public_key` that is NULL or points to 32 readable bytes;
// `verdicts` is NULL or points to `count` writable, aligned
// `gnomon_verdict` values; `result` to a writable, aligned
// `gnomon_consensus_result`. None of them changes during the call.
enum gnomon_error gnomon_consensus(const struct gnomon_vouch *answers,
                                   size_t count,
                                   size_t listed,
                                   size_t max_liars,
                                   size_t quorum,
                                   enum gnomon_verdict *verdicts,
                                   struct gnomon_consensus_result *result);

#if defined(GNOMON_STD)
// Ask the `gnomon sync` answering on the Unix socket `socket_path` (NULL:
// `/run/gnomon/now.sock`) what time it is proven to be now, and fill
// `*out`. Blocks at most 2 s. `GNOMON_OK` means sync answered: check
// `known` for what it could prove. `GNOMON_ERR_REFUSED`: no socket or
// nobody listening (or no permission: see `message`);
// `GNOMON_ERR_TIMEOUT`: no answer in time; `GNOMON_ERR_MALFORMED`: an
// answer not in the protocol, or an error answer ("busy"). `std` builds
// only.
//
// # Safety
// `socket_path` is NULL or a NUL-terminated string; `out` points to a
// writable, aligned `gnomon_now_result`.
enum gnomon_error gnomon_now(const char *socket_path, struct gnomon_now_result *out);
#endif

// Verify a relayed proof as the device: `bundle` (the binary form,
// docs/PROOF.md) made for the device's value `device` (D, 16 to 64
// bytes: `GNOMON_MIN_DEVICE_VALUE` to `GNOMON_MAX_DEVICE_VALUE`, at
// least 128 bits of them unpredictable to the relay), against the
// `n_keys` pinned Ed25519 keys at `keys` (32 bytes each, back to back;
// each distinct key one server), `elapsed_us` after the device made D
// (an upper bound from its own monotonic clock, its worst drift added).
// Fills `*out`; returns `GNOMON_OK` with the proven interval, or the
// failure's code (one per kind, `GNOMON_ERR_PROOF_*`; docs/C.md lists
// them). `GNOMON_ERR_PROOF_TOO_FEW_KEYS`: the bundle carries fewer than
// 2 × max_liars + 1 of the pinned servers, and what it carries may be
// the liars. Allocates nothing, reads no clock (also in the `no_std`
// build); works in `*ws`. Keys of either scheme, and keys grouped by
// server: `gnomon_verify_proof_any_key`.
//
// `elapsed_us` is required, and no value means "unknown": pass an upper
// bound from the device's own monotonic clock since it made D, its worst
// drift added. A bundle the relay held widens the interval only through
// it, so a value too small (0 among them) gives an interval that may
// end before the device's present.
//
// `policy` NULL: quorum 1, max_liars `GNOMON_MAX_LIARS_AUTO` (fewer than
// half of the pinned servers lie), max_radius_us 10 s.
// `GNOMON_ERR_ARGUMENT` for a device value shorter than
// `GNOMON_MIN_DEVICE_VALUE` or longer than `GNOMON_MAX_DEVICE_VALUE`
// bytes (an empty one is `GNOMON_ERR_EMPTY`), checked before the bundle
// is read, or a policy with a quorum of 0;
// `GNOMON_ERR_TOO_LONG` for more than `GNOMON_MAX_PROOF_KEYS` keys or a
// bundle over `GNOMON_MAX_PROOF_BUNDLE` bytes.
//
// # Safety
// `bundle` points to `bundle_len` readable bytes, `device` to
// `device_len`, `keys` to `32 * n_keys`; `policy` is NULL or points to
// a `gnomon_proof_policy`; `ws` to a writable, aligned
// `gnomon_proof_workspace` nothing else uses during the call; `out` to a
// writable, aligned `gnomon_proven`. None of them changes during the
// call.
enum gnomon_error gnomon_verify_proof(const uint8_t *bundle,
                                      size_t bundle_len,
                                      const uint8_t *device,
                                      size_t device_len,
                                      const uint8_t *keys,
                                      size_t n_keys,
                                      uint64_t elapsed_us,
                                      const struct gnomon_proof_policy *policy,
                                      struct gnomon_proof_workspace *ws,
                                      struct gnomon_proven *out);

// `gnomon_verify_proof` with pinned keys of either scheme: `keys` points
// to `n_keys` `gnomon_pinned_key` values, each with its own length and
// the server it belongs to: keys with one non-zero `server` are one
// voter (a machine's two identities count once), 0 a voter of its own.
// `max_liars` and the default are of these voters.
//
// # Safety
// As `gnomon_verify_proof`, with `keys` pointing to `n_keys` aligned
// `gnomon_pinned_key` values whose `public_key` is NULL or points to
// `public_key_len` readable bytes.
enum gnomon_error gnomon_verify_proof_any_key(const uint8_t *bundle,
                                              size_t bundle_len,
                                              const uint8_t *device,
                                              size_t device_len,
                                              const struct gnomon_pinned_key *keys,
                                              size_t n_keys,
                                              uint64_t elapsed_us,
                                              const struct gnomon_proof_policy *policy,
                                              struct gnomon_proof_workspace *ws,
                                              struct gnomon_proven *out);

// Check one monitor's signed server list: `document` (the bytes of its
// `/servers.json`, at most `GNOMON_MAX_SERVER_LIST`) and `signature` (of
// `/servers.json.sig`, an armored OpenSSH signature, at most
// `GNOMON_MAX_LIST_SIGNATURE`) against the pinned monitor key
// `public_key` (32 bytes; from its `ssh-ed25519` line with
// `gnomon_parse_monitor_key`) at `now_unix` (Unix seconds, the caller's
// clock), given `*seen`, the last list accepted from that key.
//
// Accepted (`GNOMON_OK`) when the signature verifies under the key in
// namespace `roughtime-server-list`, the document is JSON with `servers`
// and a valid `observatory` header, `now_unix` is before its expiry, and
// its sequence is not below `seen->sequence` (the same sequence is
// accepted only over the same bytes: the same list fetched again). Then
// `*result` holds the header and `*seen` is updated; keep it. Otherwise
// one code says why: `GNOMON_ERR_LIST_SIGNATURE`,
// `GNOMON_ERR_LIST_OTHER_KEY` (a valid signature by another key),
// `GNOMON_ERR_LIST_EXPIRED`, `GNOMON_ERR_LIST_REPLAYED`,
// `GNOMON_ERR_LIST_REUSED`, `GNOMON_ERR_LIST_MALFORMED`; `*seen` is left
// as it was. The servers are in the document, for the caller's JSON
// reader: with several monitors, use a server only when K of their
// accepted lists give it (docs/C.md). Allocates nothing, reads no clock
// (also in the `no_std` build).
//
// # Safety
// `document` points to `document_len` readable bytes, `signature` to
// `signature_len`, `public_key` to 32; `seen` to a readable and writable,
// aligned `gnomon_list_seen`; `result` to a writable, aligned
// `gnomon_list_result`. None of them changes during the call.
enum gnomon_error gnomon_verify_server_list(const uint8_t *document,
                                            size_t document_len,
                                            const uint8_t *signature,
                                            size_t signature_len,
                                            const uint8_t *public_key,
                                            int64_t now_unix,
                                            struct gnomon_list_seen *seen,
                                            struct gnomon_list_result *result);

// The 32-byte Ed25519 key of a monitor's OpenSSH public key line
// (`ssh-ed25519 AAAA… comment`, the text of its `.pub` file), `len` bytes
// at `text` (no NUL needed; at most 4096), into `out`. `GNOMON_ERR_KEY` for anything
// else (another key type, base64 that is not an ssh-ed25519 key);
// `GNOMON_ERR_ARGUMENT` for text that is not UTF-8.
//
// # Safety
// `text` points to `len` readable bytes; `out` to 32 writable bytes.
enum gnomon_error gnomon_parse_monitor_key(const char *text, size_t len, uint8_t *out);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* GNOMON_H */
