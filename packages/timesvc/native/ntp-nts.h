/*
 * NTS requests on the native responder's thread (RFC 8915 §5.7; docs/performance.md "Native responder"):
 * the authentic case of src/domain/nts-responder.ts in C. A request it cannot answer as authentic (no or
 * short UID, not exactly one cookie, no authenticator, a short nonce, a cookie under a key it does not
 * hold, a cookie or authenticator that does not verify) is left to JavaScript, which decides, counts and
 * sends the NTSN kiss or drops it exactly as before; so every failure has one implementation.
 */
#ifndef TIMESVC_NTP_NTS_H
#define TIMESVC_NTP_NTS_H

#include <stdint.h>

#include "nts-crypto.h"

#define NN_MAX_KEYS 8
#define NN_SETS 4096
#define NN_WAYS 2

typedef struct {
  uint8_t c2s[32], s2c[32];
  nc_siv_t *c2s_siv, *s2c_siv;
  double last_seen; /* perf ms of the last authentic request; -inf before */
  double last_used; /* perf ms of the last use (the way to replace is the least recently used) */
} nn_session_t;

typedef struct {
  int nkeys;
  uint32_t current;
  uint32_t ids[NN_MAX_KEYS];
  nc_gcm_t *gcm[NN_MAX_KEYS];
  nn_session_t sessions[NN_SETS][NN_WAYS];
  uint8_t scratch[4096];
  /* Nonces are taken from here, refilled by one RAND_bytes per 4 KB (each call costs a getpid()). */
  uint8_t random[4096];
  int random_left;
  uint64_t authenticated;
} nn_t;

enum { NN_PLAIN = 0, NN_FORWARD = 1, NN_AUTHENTIC = 2 };

/* An authentic request's reply plan (nn_check), sealed by nn_seal. */
typedef struct {
  nn_session_t *session;
  int uid_offset, uid_length;
  int count; /* fresh cookies in the reply */
  int length;
} nn_reply_t;

/* Replace the master keys: `current` seals new cookies; ids[i] with keys[i] open them. 0: out of memory. */
int nn_set_keys(nn_t *n, uint32_t current, const uint32_t *ids, const uint8_t *keys, int count);
void nn_free(nn_t *n);

/* Classify the request req[0, len) (len > 48; header checks and policy already passed) at perf now_ms. */
int nn_check(nn_t *n, const uint8_t *req, int len, double now_ms, nn_reply_t *r);

/*
 * Build the authentic reply after the final 48-byte header already in out (transmit timestamp included:
 * it is authenticated): UID echoed, then the authenticator sealing r->count fresh cookies. Returns the
 * reply's length (never more than the request's), or 0 when sealing failed.
 */
int nn_seal(nn_t *n, const nn_reply_t *r, const uint8_t *req, uint8_t *out);

/* Sessions seen authentic at or after perf `cutoff_ms` (the active-sessions gauge). */
int nn_active(const nn_t *n, double cutoff_ms);

#endif
