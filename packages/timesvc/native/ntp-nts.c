/* NTS requests on the native responder's thread; see ntp-nts.h. Rules and layout as src/domain/nts-responder.ts. */
#include "ntp-nts.h"

#include <math.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#define HEADER 48
#define EF_UID 0x0104
#define EF_COOKIE 0x0204
#define EF_PLACEHOLDER 0x0304
#define EF_AUTHENTICATOR 0x0404
#define UID_MIN 32
#define NONCE_MIN 16
#define AEAD_AES_SIV_CMAC_256 15
#define COOKIE_FIELD (4 + NC_COOKIE_LENGTH) /* 100 is a multiple of 4: no padding */

static int pad4(int n) { return (n + 3) & ~3; }
static int field_length(int value_length) { return 4 + pad4(value_length); }
static int authenticator_length(int nonce_length, int plain_length) {
  return 4 + 4 + pad4(nonce_length) + pad4(plain_length + 16);
}
static int u16(const uint8_t *p) { return (p[0] << 8) | p[1]; }
static void put_u16(uint8_t *p, int v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

int nn_set_keys(nn_t *n, uint32_t current, const uint32_t *ids, const uint8_t *keys, int count) {
  nc_gcm_t *fresh[NN_MAX_KEYS] = {0};
  if (count > NN_MAX_KEYS) count = NN_MAX_KEYS;
  for (int i = 0; i < count; i++) {
    fresh[i] = nc_gcm_new(keys + 32 * i);
    if (!fresh[i]) {
      for (int k = 0; k < i; k++) nc_gcm_free(fresh[k]);
      return 0;
    }
  }
  for (int i = 0; i < n->nkeys; i++) nc_gcm_free(n->gcm[i]);
  for (int i = 0; i < count; i++) {
    n->ids[i] = ids[i];
    n->gcm[i] = fresh[i];
  }
  n->nkeys = count;
  n->current = current;
  return 1;
}

void nn_free(nn_t *n) {
  for (int i = 0; i < n->nkeys; i++) nc_gcm_free(n->gcm[i]);
  n->nkeys = 0;
  for (int s = 0; s < NN_SETS; s++) {
    for (int w = 0; w < NN_WAYS; w++) {
      nc_siv_free(n->sessions[s][w].c2s_siv);
      nc_siv_free(n->sessions[s][w].s2c_siv);
      n->sessions[s][w].c2s_siv = n->sessions[s][w].s2c_siv = NULL;
    }
  }
  OPENSSL_cleanse(n->sessions, sizeof n->sessions);
  OPENSSL_cleanse(n->random, sizeof n->random);
  n->random_left = 0;
}

/* `len` (≤ 4096) random bytes for nonces (public values), from the pool refilled in bulk. */
static int nn_random(nn_t *n, uint8_t *out, int len) {
  if (n->random_left < len) {
    if (RAND_bytes(n->random, (int)sizeof n->random) != 1) return 0;
    n->random_left = (int)sizeof n->random;
  }
  uint8_t *from = n->random + sizeof n->random - n->random_left;
  memcpy(out, from, (size_t)len);
  memset(from, 0, (size_t)len); /* each byte is handed out once */
  n->random_left -= len;
  return 1;
}

static nc_gcm_t *key_of(nn_t *n, uint32_t id) {
  for (int i = 0; i < n->nkeys; i++)
    if (n->ids[i] == id) return n->gcm[i];
  return NULL;
}

/* The cached AES-SIV pair for (c2s, s2c), made on first use in the least recently used way of its set. */
static nn_session_t *session_of(nn_t *n, const uint8_t *c2s, const uint8_t *s2c, double now_ms) {
  uint32_t h = 2166136261u; /* FNV-1a of C2S */
  for (int i = 0; i < 32; i++) h = (h ^ c2s[i]) * 16777619u;
  nn_session_t *set = n->sessions[h % NN_SETS];
  nn_session_t *victim = &set[0];
  for (int w = 0; w < NN_WAYS; w++) {
    nn_session_t *s = &set[w];
    if (s->c2s_siv && memcmp(s->c2s, c2s, 32) == 0 && memcmp(s->s2c, s2c, 32) == 0) {
      s->last_used = now_ms;
      return s;
    }
    if (!s->c2s_siv || s->last_used < victim->last_used) victim = s;
  }
  nc_siv_t *a = nc_siv_new(c2s), *b = nc_siv_new(s2c);
  if (!a || !b) {
    nc_siv_free(a);
    nc_siv_free(b);
    return NULL;
  }
  nc_siv_free(victim->c2s_siv);
  nc_siv_free(victim->s2c_siv);
  memcpy(victim->c2s, c2s, 32);
  memcpy(victim->s2c, s2c, 32);
  victim->c2s_siv = a;
  victim->s2c_siv = b;
  victim->last_seen = -INFINITY;
  victim->last_used = now_ms;
  return victim;
}

int nn_check(nn_t *n, const uint8_t *b, int end, double now_ms, nn_reply_t *r) {
  /* scanNtsRequest (nts-ef.ts): the strict layout over every field first. */
  for (int at = HEADER; at < end;) {
    if (end - at < 4) return NN_PLAIN;
    int length = u16(b + at + 2);
    if (length < 4 || length % 4 != 0 || at + length > end) return NN_PLAIN;
    at += length;
  }
  int nts = 0, uid = -1, uid_len = 0, cookies = 0, cookie = -1, cookie_len = 0, placeholders_ok = 0;
  int auth = 0, ad_end = end, nonce = 0, nonce_len = 0, ct = 0, ct_len = 0, placeholders = 0;
  for (int at = HEADER; at < end;) {
    int type = u16(b + at), length = u16(b + at + 2), value = at + 4, value_len = length - 4;
    if (type == EF_AUTHENTICATOR) {
      /* Malformed NTS content in well-formed fields: JavaScript drops it (nts-responder.ts check). */
      if (value_len < 4) return NN_FORWARD;
      nonce_len = u16(b + value);
      ct_len = u16(b + value + 2);
      if (4 + pad4(nonce_len) + pad4(ct_len) > value_len) return NN_FORWARD;
      auth = 1;
      nts = 1;
      ad_end = at;
      nonce = value + 4;
      ct = value + 4 + pad4(nonce_len);
      break;
    }
    if (type == EF_UID) {
      if (uid >= 0) return NN_FORWARD;
      uid = value;
      uid_len = value_len;
      nts = 1;
    } else if (type == EF_COOKIE) {
      if (cookies == 0) {
        cookie = value;
        cookie_len = value_len;
      }
      cookies++;
      nts = 1;
    } else if (type == EF_PLACEHOLDER && placeholders < 512) {
      placeholders++;
      if (value_len == NC_COOKIE_LENGTH) placeholders_ok++;
    }
    at += length;
  }
  if (!nts) return NN_PLAIN;
  /* Everything but the authentic case is JavaScript's to decide (nts-responder.ts check). */
  if (uid < 0 || uid_len < UID_MIN || cookies != 1 || !auth || nonce_len < NONCE_MIN) return NN_FORWARD;
  if (cookie_len != NC_COOKIE_LENGTH || ct_len < 16 || ct_len - 16 > (int)sizeof n->scratch) return NN_FORWARD;
  const uint8_t *c = b + cookie;
  uint32_t id = ((uint32_t)c[0] << 24) | ((uint32_t)c[1] << 16) | ((uint32_t)c[2] << 8) | c[3];
  nc_gcm_t *g = id <= n->current ? key_of(n, id) : NULL;
  if (!g) return NN_FORWARD;
  uint8_t plain[NC_PLAIN_LENGTH];
  if (!nc_gcm_open(g, c, plain)) return NN_FORWARD;
  if (u16(plain) != AEAD_AES_SIV_CMAC_256) {
    OPENSSL_cleanse(plain, sizeof plain);
    return NN_FORWARD;
  }
  nn_session_t *s = session_of(n, plain + 36, plain + 4, now_ms);
  OPENSSL_cleanse(plain, sizeof plain);
  if (!s) return NN_FORWARD;
  int ok = nc_siv_open(s->c2s_siv, b, (size_t)ad_end, b + nonce, (size_t)nonce_len, b + ct, (size_t)ct_len,
                       n->scratch);
  OPENSSL_cleanse(n->scratch, (size_t)(ct_len - 16));
  if (!ok) return NN_FORWARD;
  __atomic_store(&s->last_seen, &now_ms, __ATOMIC_RELAXED);
  /* Non-amplification (RFC 8915 §5.7): fresh cookies for the cookie and each placeholder of its size, as
   * many as fit in the request's length. */
  int uid_field = field_length(uid_len);
  int count = 1 + placeholders_ok;
  while (count > 1 && HEADER + uid_field + authenticator_length(16, count * COOKIE_FIELD) > end) count--;
  r->session = s;
  r->uid_offset = uid;
  r->uid_length = uid_len;
  r->count = count;
  r->length = HEADER + uid_field + authenticator_length(16, count * COOKIE_FIELD);
  return NN_AUTHENTIC;
}

int nn_seal(nn_t *n, const nn_reply_t *r, const uint8_t *req, uint8_t *out) {
  nc_gcm_t *g = key_of(n, n->current);
  if (!g || r->count * COOKIE_FIELD > (int)sizeof n->scratch) return 0;
  int uid_field = field_length(r->uid_length);
  int at = HEADER;
  /* UID echoed (authenticated, not encrypted), zero-padded. */
  put_u16(out + at, EF_UID);
  put_u16(out + at + 2, uid_field);
  memcpy(out + at + 4, req + r->uid_offset, (size_t)r->uid_length);
  memset(out + at + 4 + r->uid_length, 0, (size_t)(uid_field - 4 - r->uid_length));
  at += uid_field;
  int ad_end = at;
  /* Plaintext: fresh cookies, each in a Cookie field (docs/nts.md "Cookies"). */
  uint8_t keys[NC_PLAIN_LENGTH];
  put_u16(keys, AEAD_AES_SIV_CMAC_256);
  keys[2] = keys[3] = 0;
  memcpy(keys + 4, r->session->s2c, 32);
  memcpy(keys + 36, r->session->c2s, 32);
  int plain_len = r->count * COOKIE_FIELD;
  uint8_t *plain = n->scratch;
  int ok = 1;
  for (int i = 0; i < r->count && ok; i++) {
    uint8_t *f = plain + i * COOKIE_FIELD;
    put_u16(f, EF_COOKIE);
    put_u16(f + 2, COOKIE_FIELD);
    uint8_t *c = f + 4;
    c[0] = (uint8_t)(n->current >> 24);
    c[1] = (uint8_t)(n->current >> 16);
    c[2] = (uint8_t)(n->current >> 8);
    c[3] = (uint8_t)n->current;
    ok = nn_random(n, c + NC_NONCE_AT, NC_NONCE_LENGTH) && nc_gcm_seal(g, c, keys);
  }
  OPENSSL_cleanse(keys, sizeof keys);
  /* Authenticator: nonce length, ciphertext length, nonce, V ‖ C (RFC 8915 §5.6). */
  int nonce_at = at + 8;
  ok = ok && nn_random(n, out + nonce_at, 16) &&
       nc_siv_seal(r->session->s2c_siv, out, (size_t)ad_end, out + nonce_at, 16, plain, (size_t)plain_len,
                   out + nonce_at + 16);
  OPENSSL_cleanse(plain, (size_t)plain_len);
  if (!ok) return 0;
  int sealed = 16 + plain_len;
  int auth_len = authenticator_length(16, plain_len);
  put_u16(out + at, EF_AUTHENTICATOR);
  put_u16(out + at + 2, auth_len);
  put_u16(out + at + 4, 16);
  put_u16(out + at + 6, sealed);
  int end = at + auth_len;
  memset(out + nonce_at + 16 + sealed, 0, (size_t)(end - (nonce_at + 16 + sealed)));
  n->authenticated++;
  return end;
}

int nn_active(const nn_t *n, double cutoff_ms) {
  int active = 0;
  /* Read from the JavaScript thread while the native one writes: each field is read whole (relaxed). */
  for (int s = 0; s < NN_SETS; s++) {
    for (int w = 0; w < NN_WAYS; w++) {
      double seen;
      __atomic_load(&n->sessions[s][w].last_seen, &seen, __ATOMIC_RELAXED);
      if (__atomic_load_n(&n->sessions[s][w].c2s_siv, __ATOMIC_RELAXED) && seen >= cutoff_ms) active++;
    }
  }
  return active;
}
