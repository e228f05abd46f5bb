/*
 * The plain-NTP responder of the native server thread (docs/performance.md "Native responder"): the same
 * decisions and the same bytes as src/domain/ntp-responder.ts respondInto() with its rate limiter
 * (src/domain/rate-limiter.ts) and access list (src/domain/access-list.ts), in C, so that a plain request
 * is answered without waking the JavaScript thread. Pure: no sockets, no clocks; time is passed in as
 * "perf" milliseconds (the scale of JavaScript's performance.now()). test/ntp-native-responder.test.ts
 * checks every function here against the JavaScript on random inputs.
 */
#ifndef TIMESVC_NTP_FAST_H
#define TIMESVC_NTP_FAST_H

#include <stdint.h>

/*
 * respondInto's outcome codes (src/domain/ntp-responder.ts OUTCOME), as (C name, OUTCOME key, code): the
 * ntp_mmsg addon's layout() returns the keys and codes, and src/io/native-served.ts refuses an addon whose
 * codes differ from OUTCOME.
 */
#define NF_OUTCOMES(X)                                                                                      \
  X(NF_REPLY, "REPLY", 0) X(NF_KOD_RATE, "KOD_RATE", 1) X(NF_KOD_DENY, "KOD_DENY", 2)                     \
  X(NF_DROP_SHORT, "DROP_SHORT", 3) X(NF_DROP_NOT_CLIENT, "DROP_NOT_CLIENT", 4)                           \
  X(NF_DROP_BAD_VERSION, "DROP_BAD_VERSION", 5) X(NF_DROP_MALFORMED, "DROP_MALFORMED", 6)                 \
  X(NF_DROP_AUTHENTICATED, "DROP_AUTHENTICATED", 7) X(NF_DROP_RATE_LIMITED, "DROP_RATE_LIMITED", 8)

#define NF_OUTCOME_ENUM(id, key, code) id = code,
enum { NF_OUTCOMES(NF_OUTCOME_ENUM) };
#undef NF_OUTCOME_ENUM

/*
 * What the served clock and the clock manager advertise, handed over by JavaScript whenever either changes
 * (src/io/native-responder.ts). The served clock is one linear piece: for perf in [p0, p1) the served NTP
 * time is sec0 seconds + (ns0 + (perf - p0) * 1e6 * rate) nanoseconds. Outside it (or while !valid) the
 * native side answers nothing itself.
 */
typedef struct {
  int valid;
  double p0, p1, sec0, ns0, rate;
  int leap, stratum, precision;
  uint32_t refid, ref_sec, ref_frac;
  double root_delay_s, disp_s, disp_rate, updated_ms;
} nf_served_t;

/* One allowed network (ntp.allowed_networks): family 4 or 6, the address bytes, the prefix length. */
typedef struct {
  int family;
  uint8_t addr[16];
  int prefix;
} nf_network_t;

typedef struct {
  int32_t prev, next; /* LRU list, oldest first; -1 ends */
  uint8_t key[17];    /* [0] = 4: IPv4 in 1..4; [0] = 6: the masked IPv6 prefix in 1..16 */
  double tokens, last_ms, last_kod_ms;
  /* The client log (client-log.ts ClientLogEntry): counts, the last request in 1/16 s (-1 none), chrony's
   * scaled log2 rates (NF_INVALID_RATE unknown), whether the previous request was dropped. */
  uint64_t hits, drops, kod_rate, kod_deny;
  int64_t last_ts;
  int rate, timeout_rate, dropped;
} nf_bucket_t;

#define NF_INVALID_RATE (-128)

/* One client of nf_limiter_snapshot: the key (as nf_bucket_t.key) and the log's fields. */
typedef struct {
  uint8_t key[17];
  double hits, drops, kod_rate, kod_deny, last_ts, rate, timeout_rate;
} nf_client_t;

/* The per-client token buckets, bounded at max_clients (least recently seen evicted first). */
typedef struct {
  int enabled;
  double burst, refill_per_ms, kod_ms;
  int32_t max_clients, ipv6_prefix;
  nf_bucket_t *buckets;
  int32_t count, capacity; /* buckets in use, allocated */
  int32_t *table;          /* open addressing (linear probing) over bucket indices; -1 empty */
  uint32_t mask;           /* table size - 1 */
  int32_t oldest, newest;
} nf_limiter_t;

typedef struct {
  nf_network_t *networks;
  int count; /* 0: everyone is allowed */
  nf_limiter_t limiter;
} nf_policy_t;

/* Rate limiter (rate-limiter.ts): 0 on success, -1 out of memory. */
int nf_limiter_init(nf_limiter_t *l, int enabled, double average_interval_s, double burst, double kod_interval_s,
                    int32_t max_clients, int32_t ipv6_prefix);
void nf_limiter_free(nf_limiter_t *l);
/* The decision for the client of address record `rec` (native/mmsg.c layout) at now_ms: 0 allow, 1 kod,
 * 2 drop, logged in the client's entry (`denied`: the access list refused it). The table and the log are
 * kept when the limiter is disabled (then always 0). A bucket that cannot be allocated allows the request
 * unlogged (memory is bounded at init instead). */
int nf_limiter_check(nf_limiter_t *l, const uint8_t *rec, double now_ms, int denied);
/* Up to `max` clients, most recently seen first, into out[]; returns how many. */
int nf_limiter_snapshot(const nf_limiter_t *l, nf_client_t *out, int max);

/* Access list: whether the address record's source is allowed (IPv4-mapped IPv6 counts as IPv4). */
int nf_access_allows(const nf_policy_t *p, const uint8_t *rec);

/* scanTrailer (ntp-packet.ts): 0 none, 1 a legacy MAC, 2 malformed. */
int nf_scan_trailer(const uint8_t *buf, int length);

/*
 * respondInto for the request buf[0, length) from address record `rec`, arrived at perf `at_ms`: writes a
 * kiss or the reply header (receive and transmit timestamps zero) into out[0, 48) and returns the outcome.
 */
int nf_decide(const uint8_t *buf, int length, const uint8_t *rec, double at_ms, const nf_served_t *s,
              nf_policy_t *p, uint8_t *out);

/* The served time at perf `perf_ms` as an NTP timestamp, big-endian, into out[0, 8) (ServedClock.write). */
void nf_served_write(const nf_served_t *s, double perf_ms, uint8_t *out);

#endif
