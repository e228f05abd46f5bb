/* The NTS cryptography without N-API; see nts-crypto.h. */
#include "nts-crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <stdlib.h>
#include <string.h>

/* An empty input may have no data pointer; OpenSSL reads a NULL input as "final", so point it here. */
static const uint8_t empty_input[16];

/*
 * AES-256-GCM for NTS cookies with the key schedule kept per master key. node:crypto builds a new cipher
 * object (and AES key schedule) for every GCM nonce, because a Cipheriv cannot take a new IV; OpenSSL
 * itself can: EVP_EncryptInit_ex / EVP_DecryptInit_ex with only an IV re-initialise a context whose
 * cipher and key are already set (EVP_EncryptInit(3), "GCM and OCB modes").
 */
struct nc_gcm {
  EVP_CIPHER_CTX *enc;
  EVP_CIPHER_CTX *dec;
};

nc_gcm_t *nc_gcm_new(const uint8_t key[32]) {
  nc_gcm_t *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->enc = EVP_CIPHER_CTX_new();
  g->dec = EVP_CIPHER_CTX_new();
  if (!g->enc || !g->dec || EVP_EncryptInit_ex(g->enc, EVP_aes_256_gcm(), NULL, key, NULL) != 1 ||
      EVP_DecryptInit_ex(g->dec, EVP_aes_256_gcm(), NULL, key, NULL) != 1) {
    nc_gcm_free(g);
    return NULL;
  }
  return g;
}

void nc_gcm_free(nc_gcm_t *g) {
  if (!g) return;
  EVP_CIPHER_CTX_free(g->enc);
  EVP_CIPHER_CTX_free(g->dec);
  free(g);
}

int nc_gcm_seal(nc_gcm_t *g, uint8_t *c, const uint8_t *plain) {
  int n = 0, m = 0;
  return EVP_EncryptInit_ex(g->enc, NULL, NULL, NULL, c + NC_NONCE_AT) == 1 &&
         EVP_EncryptUpdate(g->enc, c + NC_CT_AT, &n, plain, NC_PLAIN_LENGTH) == 1 && n == NC_PLAIN_LENGTH &&
         EVP_EncryptFinal_ex(g->enc, c + NC_CT_AT + n, &m) == 1 && m == 0 &&
         EVP_CIPHER_CTX_ctrl(g->enc, EVP_CTRL_GCM_GET_TAG, NC_TAG_LENGTH, c + NC_TAG_AT) == 1;
}

int nc_gcm_open(nc_gcm_t *g, const uint8_t *c, uint8_t *plain) {
  int n = 0, m = 0;
  uint8_t tag[NC_TAG_LENGTH];
  memcpy(tag, c + NC_TAG_AT, NC_TAG_LENGTH);
  int ok = EVP_DecryptInit_ex(g->dec, NULL, NULL, NULL, c + NC_NONCE_AT) == 1 &&
           EVP_DecryptUpdate(g->dec, plain, &n, c + NC_CT_AT, NC_PLAIN_LENGTH) == 1 && n == NC_PLAIN_LENGTH &&
           EVP_CIPHER_CTX_ctrl(g->dec, EVP_CTRL_GCM_SET_TAG, NC_TAG_LENGTH, tag) == 1 &&
           EVP_DecryptFinal_ex(g->dec, plain + n, &m) == 1;
  if (!ok) memset(plain, 0, NC_PLAIN_LENGTH); /* nothing of an unauthenticated cookie is handed out */
  return ok;
}

/*
 * AES-SIV-CMAC-256 (RFC 5297; AEAD 15, two AES-128 keys) through OpenSSL's "AES-128-SIV" cipher, for the
 * NTS authenticators (RFC 8915 §5.6) with the associated data as two S2V components: the packet before the
 * authenticator, then the nonce. OpenSSL's SIV context cannot restart S2V without its key, and re-keying
 * it fetches its CTR and CBC ciphers by name and sets up CMAC again (3.5 µs per 228-byte seal, most of it in
 * OpenSSL's provider lookups); so a template context is keyed once and each operation starts from a copy
 * of it (EVP_CIPHER_CTX_copy: the provider duplicates the keyed state, no lookup): 1.9 µs (docs/
 * performance.md "AES-SIV"). Output as the JavaScript AesSiv's: V (16) then C.
 */
struct nc_siv {
  /* Keyed once (S2V at its start); each operation copies it into ctx. */
  EVP_CIPHER_CTX *tmpl;
  EVP_CIPHER_CTX *ctx;
  EVP_CIPHER *cipher;
  /* CMAC under the first key half: S2V by hand for an empty plaintext, which OpenSSL's EVP layer skips. */
  EVP_MAC *mac;
  EVP_MAC_CTX *cmac;
};

void nc_siv_free(nc_siv_t *s) {
  if (!s) return;
  EVP_CIPHER_CTX_free(s->tmpl);
  EVP_CIPHER_CTX_free(s->ctx);
  EVP_CIPHER_free(s->cipher);
  EVP_MAC_CTX_free(s->cmac);
  EVP_MAC_free(s->mac);
  free(s);
}

nc_siv_t *nc_siv_new(const uint8_t key[32]) {
  nc_siv_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->cipher = EVP_CIPHER_fetch(NULL, "AES-128-SIV", NULL);
  s->ctx = EVP_CIPHER_CTX_new();
  s->tmpl = EVP_CIPHER_CTX_new();
  s->mac = EVP_MAC_fetch(NULL, "CMAC", NULL);
  s->cmac = s->mac ? EVP_MAC_CTX_new(s->mac) : NULL;
  char cbc[] = "AES-128-CBC";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, cbc, 0), OSSL_PARAM_construct_end()};
  if (!s->cipher || !s->ctx || !s->tmpl || !s->cmac || EVP_MAC_init(s->cmac, key, 16, params) != 1 ||
      EVP_CipherInit_ex(s->tmpl, s->cipher, NULL, key, NULL, 1) != 1) {
    nc_siv_free(s);
    return NULL;
  }
  return s;
}

/* A fresh S2V from the keyed template, then the two associated-data components. */
static int siv_start(nc_siv_t *s, int enc, const uint8_t *ad, size_t ad_len, const uint8_t *nonce,
                     size_t nonce_len) {
  int n = 0;
  if (EVP_CIPHER_CTX_copy(s->ctx, s->tmpl) != 1) return 0;
  if (EVP_CipherInit_ex(s->ctx, NULL, NULL, NULL, NULL, enc) != 1) return 0;
  if (EVP_CipherUpdate(s->ctx, NULL, &n, ad_len ? ad : empty_input, (int)ad_len) != 1) return 0;
  if (EVP_CipherUpdate(s->ctx, NULL, &n, nonce_len ? nonce : empty_input, (int)nonce_len) != 1) return 0;
  return 1;
}

static int cmac(nc_siv_t *s, const uint8_t *data, size_t len, uint8_t out[16]) {
  size_t n = 0;
  return EVP_MAC_init(s->cmac, NULL, 0, NULL) == 1 && EVP_MAC_update(s->cmac, len ? data : empty_input, len) == 1 &&
         EVP_MAC_final(s->cmac, out, &n, 16) == 1 && n == 16;
}

static void dbl(uint8_t b[16]) {
  uint8_t carry = 0;
  uint8_t msb = b[0] & 0x80;
  for (int i = 15; i >= 0; i--) {
    uint8_t next = b[i] >> 7;
    b[i] = (uint8_t)((b[i] << 1) | carry);
    carry = next;
  }
  if (msb) b[15] ^= 0x87;
}

/* RFC 5297 §2.4 S2V(ad, nonce, empty plaintext): the synthetic IV of an authenticator with no plaintext. */
static int s2v_empty(nc_siv_t *s, const uint8_t *ad, size_t ad_len, const uint8_t *nonce, size_t nonce_len,
                     uint8_t v[16]) {
  static const uint8_t zero[16];
  uint8_t d[16], t[16];
  if (!cmac(s, zero, 16, d)) return 0;
  dbl(d);
  if (!cmac(s, ad, ad_len, t)) return 0;
  for (int i = 0; i < 16; i++) d[i] ^= t[i];
  dbl(d);
  if (!cmac(s, nonce, nonce_len, t)) return 0;
  for (int i = 0; i < 16; i++) d[i] ^= t[i];
  dbl(d);
  d[0] ^= 0x80; /* pad(empty) = 10^127 */
  return cmac(s, d, 16, v);
}

int nc_siv_seal(nc_siv_t *s, const uint8_t *ad, size_t ad_len, const uint8_t *nonce, size_t nonce_len,
                const uint8_t *plain, size_t plain_len, uint8_t *out) {
  if (plain_len == 0) return s2v_empty(s, ad, ad_len, nonce, nonce_len, out);
  int n = 0, m = 0;
  return siv_start(s, 1, ad, ad_len, nonce, nonce_len) &&
         EVP_CipherUpdate(s->ctx, out + 16, &n, plain, (int)plain_len) == 1 && (size_t)n == plain_len &&
         EVP_CipherFinal_ex(s->ctx, out + 16 + n, &m) == 1 && m == 0 &&
         EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_GET_TAG, 16, out) == 1;
}

int nc_siv_open(nc_siv_t *s, const uint8_t *ad, size_t ad_len, const uint8_t *nonce, size_t nonce_len,
                const uint8_t *sealed, size_t sealed_len, uint8_t *plain) {
  if (sealed_len < 16) return 0;
  uint8_t tag[16];
  memcpy(tag, sealed, 16);
  if (sealed_len == 16) {
    uint8_t v[16];
    return s2v_empty(s, ad, ad_len, nonce, nonce_len, v) && CRYPTO_memcmp(v, tag, 16) == 0;
  }
  int n = 0, m = 0;
  int ok = siv_start(s, 0, ad, ad_len, nonce, nonce_len) &&
           EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_SET_TAG, 16, tag) == 1 &&
           EVP_CipherUpdate(s->ctx, plain, &n, sealed + 16, (int)(sealed_len - 16)) == 1 &&
           EVP_CipherFinal_ex(s->ctx, plain + n, &m) == 1;
  if (!ok) memset(plain, 0, sealed_len - 16);
  return ok;
}
