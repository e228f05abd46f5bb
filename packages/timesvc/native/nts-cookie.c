/*
 * AES-256-GCM for NTS cookies (docs/nts.md "Cookies") with the key schedule kept per master key.
 *
 * node:crypto builds a new cipher object (and AES key schedule) for every GCM nonce, because a Cipheriv
 * cannot take a new IV; per NTS request that is one object to open the client's cookie and one per fresh
 * cookie (docs/performance.md "NTS request"). OpenSSL itself can: EVP_EncryptInit_ex / EVP_DecryptInit_ex
 * with only an IV re-initialise a context whose cipher and key are already set (EVP_EncryptInit(3), "GCM
 * and OCB modes"). This addon keeps one encrypting and one decrypting context per master key and uses the
 * OpenSSL inside the running Node. Same cookie layout, same output bytes as the node:crypto path, which
 * stays as the fallback where the addon is not built (domain/nts-cookies.ts).
 *
 *   key id u32 | nonce 12 | AES-256-GCM(plaintext 68) | tag 16      (100 bytes)
 */
#include <node_api.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/params.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define COOKIE_LENGTH 100
#define NONCE_AT 4
#define NONCE_LENGTH 12
#define CT_AT 16
#define PLAIN_LENGTH 68
#define TAG_AT 84
#define TAG_LENGTH 16

typedef struct {
  EVP_CIPHER_CTX *enc;
  EVP_CIPHER_CTX *dec;
} gcm_t;

static void finalize_gcm(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  gcm_t *g = (gcm_t *)data;
  EVP_CIPHER_CTX_free(g->enc);
  EVP_CIPHER_CTX_free(g->dec);
  free(g);
}

/* An empty array may have no data pointer; OpenSSL reads a NULL input as "final", so point it here. */
static uint8_t empty_input[16];

static int bytes(napi_env env, napi_value v, uint8_t **data, size_t *len) {
  napi_typedarray_type type;
  napi_value ab;
  size_t off;
  void *p;
  if (napi_get_typedarray_info(env, v, &type, len, &p, &ab, &off) != napi_ok || type != napi_uint8_array) return 0;
  *data = p != NULL ? (uint8_t *)p : empty_input;
  return 1;
}

/* key(key 32 bytes) -> handle */
static napi_value Key(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t *key;
  size_t len;
  if (argc < 1 || !bytes(env, argv[0], &key, &len) || len != 32) {
    napi_throw_type_error(env, NULL, "key: a 32-byte Uint8Array");
    return NULL;
  }
  gcm_t *g = calloc(1, sizeof *g);
  if (!g) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  g->enc = EVP_CIPHER_CTX_new();
  g->dec = EVP_CIPHER_CTX_new();
  if (!g->enc || !g->dec || EVP_EncryptInit_ex(g->enc, EVP_aes_256_gcm(), NULL, key, NULL) != 1 ||
      EVP_DecryptInit_ex(g->dec, EVP_aes_256_gcm(), NULL, key, NULL) != 1) {
    EVP_CIPHER_CTX_free(g->enc);
    EVP_CIPHER_CTX_free(g->dec);
    free(g);
    napi_throw_error(env, NULL, "AES-256-GCM context");
    return NULL;
  }
  napi_value handle;
  napi_create_external(env, g, finalize_gcm, NULL, &handle);
  return handle;
}

static gcm_t *gcm_of(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "not a cookie key");
    return NULL;
  }
  return (gcm_t *)p;
}

/*
 * seal(handle, out, offset, plain 68): out[offset+4 .. +16) already holds the nonce (and the key id before
 * it); writes the ciphertext and the tag. Returns true.
 */
static napi_value Seal(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t *out, *plain;
  size_t out_len, plain_len;
  int32_t offset = -1;
  gcm_t *g = argc >= 4 ? gcm_of(env, argv[0]) : NULL;
  if (!g || !bytes(env, argv[1], &out, &out_len) || napi_get_value_int32(env, argv[2], &offset) != napi_ok ||
      offset < 0 || (size_t)offset + COOKIE_LENGTH > out_len || !bytes(env, argv[3], &plain, &plain_len) ||
      plain_len != PLAIN_LENGTH) {
    if (g) napi_throw_type_error(env, NULL, "seal(handle, out, offset, plain)");
    return NULL;
  }
  uint8_t *c = out + offset;
  int n = 0, m = 0;
  int ok = EVP_EncryptInit_ex(g->enc, NULL, NULL, NULL, c + NONCE_AT) == 1 &&
           EVP_EncryptUpdate(g->enc, c + CT_AT, &n, plain, PLAIN_LENGTH) == 1 && n == PLAIN_LENGTH &&
           EVP_EncryptFinal_ex(g->enc, c + CT_AT + n, &m) == 1 && m == 0 &&
           EVP_CIPHER_CTX_ctrl(g->enc, EVP_CTRL_GCM_GET_TAG, TAG_LENGTH, c + TAG_AT) == 1;
  if (!ok) {
    napi_throw_error(env, NULL, "AES-256-GCM seal failed");
    return NULL;
  }
  napi_value result;
  napi_get_boolean(env, 1, &result);
  return result;
}

/* open(handle, cookie 100, plainOut 68) -> true when the tag verifies (plainOut then holds the keys). */
static napi_value Open(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t *c, *plain;
  size_t c_len, plain_len;
  gcm_t *g = argc >= 3 ? gcm_of(env, argv[0]) : NULL;
  if (!g || !bytes(env, argv[1], &c, &c_len) || c_len != COOKIE_LENGTH || !bytes(env, argv[2], &plain, &plain_len) ||
      plain_len != PLAIN_LENGTH) {
    if (g) napi_throw_type_error(env, NULL, "open(handle, cookie, plain)");
    return NULL;
  }
  int n = 0, m = 0;
  uint8_t tag[TAG_LENGTH];
  memcpy(tag, c + TAG_AT, TAG_LENGTH);
  int ok = EVP_DecryptInit_ex(g->dec, NULL, NULL, NULL, c + NONCE_AT) == 1 &&
           EVP_DecryptUpdate(g->dec, plain, &n, c + CT_AT, PLAIN_LENGTH) == 1 && n == PLAIN_LENGTH &&
           EVP_CIPHER_CTX_ctrl(g->dec, EVP_CTRL_GCM_SET_TAG, TAG_LENGTH, tag) == 1 &&
           EVP_DecryptFinal_ex(g->dec, plain + n, &m) == 1;
  if (!ok) memset(plain, 0, PLAIN_LENGTH); /* nothing of an unauthenticated cookie is handed out */
  napi_value result;
  napi_get_boolean(env, ok, &result);
  return result;
}


/*
 * AES-SIV-CMAC-256 (RFC 5297; AEAD 15, two AES-128 keys) through OpenSSL's "AES-128-SIV" cipher, for the
 * NTS authenticators (RFC 8915 §5.6) with the associated data as two S2V components: the packet before the
 * authenticator, then the nonce. OpenSSL's SIV context cannot restart S2V without its key, and re-keying
 * it fetches its CTR and CBC ciphers by name and sets up CMAC again (3.5 µs per 228-byte seal, most of it in
 * OpenSSL's provider lookups); so a template context is keyed once and each operation starts from a copy
 * of it (EVP_CIPHER_CTX_copy: the provider duplicates the keyed state, no lookup): 1.9 µs (docs/
 * performance.md "AES-SIV"). Output as the JavaScript AesSiv's:
 * V (16) then C.
 */
typedef struct {
  /* Keyed once (S2V at its start); each operation copies it into ctx. */
  EVP_CIPHER_CTX *tmpl;
  EVP_CIPHER_CTX *ctx;
  EVP_CIPHER *cipher;
  /* CMAC under the first key half: S2V by hand for an empty plaintext, which OpenSSL's EVP layer skips. */
  EVP_MAC *mac;
  EVP_MAC_CTX *cmac;
} siv_t;

static void finalize_siv(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  siv_t *s = (siv_t *)data;
  EVP_CIPHER_CTX_free(s->tmpl);
  EVP_CIPHER_CTX_free(s->ctx);
  EVP_CIPHER_free(s->cipher);
  EVP_MAC_CTX_free(s->cmac);
  EVP_MAC_free(s->mac);
  free(s);
}

/* sivKey(key 32 bytes) -> handle, or undefined when this OpenSSL has no AES-SIV. */
static napi_value SivKey(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t *key;
  size_t len;
  if (argc < 1 || !bytes(env, argv[0], &key, &len) || len != 32) {
    napi_throw_type_error(env, NULL, "sivKey: a 32-byte Uint8Array");
    return NULL;
  }
  napi_value result;
  siv_t *s = calloc(1, sizeof *s);
  if (!s) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  s->cipher = EVP_CIPHER_fetch(NULL, "AES-128-SIV", NULL);
  s->ctx = EVP_CIPHER_CTX_new();
  s->tmpl = EVP_CIPHER_CTX_new();
  s->mac = EVP_MAC_fetch(NULL, "CMAC", NULL);
  s->cmac = s->mac ? EVP_MAC_CTX_new(s->mac) : NULL;
  char cbc[] = "AES-128-CBC";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, cbc, 0), OSSL_PARAM_construct_end()};
  if (!s->cipher || !s->ctx || !s->tmpl || !s->cmac || EVP_MAC_init(s->cmac, key, 16, params) != 1 ||
      EVP_CipherInit_ex(s->tmpl, s->cipher, NULL, key, NULL, 1) != 1) {
    EVP_CIPHER_free(s->cipher);
    EVP_CIPHER_CTX_free(s->tmpl);
    EVP_CIPHER_CTX_free(s->ctx);
    EVP_MAC_CTX_free(s->cmac);
    EVP_MAC_free(s->mac);
    free(s);
    napi_get_undefined(env, &result);
    return result;
  }
  napi_create_external(env, s, finalize_siv, NULL, &result);
  return result;
}

static siv_t *siv_of(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "not a SIV key");
    return NULL;
  }
  return (siv_t *)p;
}

/* A fresh S2V from the keyed template, then the two associated-data components. */
static int siv_start(siv_t *s, int enc, const uint8_t *ad, size_t ad_len, const uint8_t *nonce, size_t nonce_len) {
  int n = 0;
  if (EVP_CIPHER_CTX_copy(s->ctx, s->tmpl) != 1) return 0;
  if (EVP_CipherInit_ex(s->ctx, NULL, NULL, NULL, NULL, enc) != 1) return 0;
  if (EVP_CipherUpdate(s->ctx, NULL, &n, ad, (int)ad_len) != 1) return 0;
  if (EVP_CipherUpdate(s->ctx, NULL, &n, nonce, (int)nonce_len) != 1) return 0;
  return 1;
}

static int cmac(siv_t *s, const uint8_t *data, size_t len, uint8_t out[16]) {
  size_t n = 0;
  return EVP_MAC_init(s->cmac, NULL, 0, NULL) == 1 && EVP_MAC_update(s->cmac, data, len) == 1 &&
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
static int s2v_empty(siv_t *s, const uint8_t *ad, size_t ad_len, const uint8_t *nonce, size_t nonce_len,
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

/* sivSeal(handle, ad, nonce, plain, out) -> length written to out (16 + plain.length): V ‖ C. */
static napi_value SivSeal(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t *ad, *nonce, *plain, *out;
  size_t ad_len, nonce_len, plain_len, out_len;
  siv_t *s = argc >= 5 ? siv_of(env, argv[0]) : NULL;
  if (!s || !bytes(env, argv[1], &ad, &ad_len) || !bytes(env, argv[2], &nonce, &nonce_len) ||
      !bytes(env, argv[3], &plain, &plain_len) || !bytes(env, argv[4], &out, &out_len) ||
      out_len < 16 + plain_len || ad_len > 65536 || plain_len > 65536) {
    if (s) napi_throw_type_error(env, NULL, "sivSeal(handle, ad, nonce, plain, out)");
    return NULL;
  }
  int n = 0, m = 0;
  if (plain_len == 0) {
    if (!s2v_empty(s, ad, ad_len, nonce, nonce_len, out)) {
      napi_throw_error(env, NULL, "AES-SIV seal failed");
      return NULL;
    }
    napi_value r;
    napi_create_int32(env, 16, &r);
    return r;
  }
  int ok = siv_start(s, 1, ad, ad_len, nonce, nonce_len) &&
           EVP_CipherUpdate(s->ctx, out + 16, &n, plain, (int)plain_len) == 1 && (size_t)n == plain_len &&
           EVP_CipherFinal_ex(s->ctx, out + 16 + n, &m) == 1 && m == 0 &&
           EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_GET_TAG, 16, out) == 1;
  if (!ok) {
    napi_throw_error(env, NULL, "AES-SIV seal failed");
    return NULL;
  }
  napi_value result;
  napi_create_int32(env, (int32_t)(16 + plain_len), &result);
  return result;
}

/* sivOpen(handle, ad, nonce, sealed, plainOut) -> true when V verifies (plainOut = sealed.length - 16). */
static napi_value SivOpen(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t *ad, *nonce, *sealed, *plain;
  size_t ad_len, nonce_len, sealed_len, plain_len;
  siv_t *s = argc >= 5 ? siv_of(env, argv[0]) : NULL;
  if (!s || !bytes(env, argv[1], &ad, &ad_len) || !bytes(env, argv[2], &nonce, &nonce_len) ||
      !bytes(env, argv[3], &sealed, &sealed_len) || !bytes(env, argv[4], &plain, &plain_len) || sealed_len < 16 ||
      plain_len < sealed_len - 16 || ad_len > 65536 || sealed_len > 65536) {
    if (s) napi_throw_type_error(env, NULL, "sivOpen(handle, ad, nonce, sealed, plain)");
    return NULL;
  }
  int n = 0, m = 0;
  uint8_t tag[16];
  memcpy(tag, sealed, 16);
  if (sealed_len == 16) {
    uint8_t v[16];
    int good = s2v_empty(s, ad, ad_len, nonce, nonce_len, v) && CRYPTO_memcmp(v, tag, 16) == 0;
    napi_value r;
    napi_get_boolean(env, good, &r);
    return r;
  }
  int ok = siv_start(s, 0, ad, ad_len, nonce, nonce_len) &&
           EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_AEAD_SET_TAG, 16, tag) == 1 &&
           EVP_CipherUpdate(s->ctx, plain, &n, sealed + 16, (int)(sealed_len - 16)) == 1 &&
           EVP_CipherFinal_ex(s->ctx, plain + n, &m) == 1;
  if (!ok) memset(plain, 0, sealed_len - 16);
  napi_value result;
  napi_get_boolean(env, ok, &result);
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"key", NULL, Key, NULL, NULL, NULL, napi_default, NULL},
      {"seal", NULL, Seal, NULL, NULL, NULL, napi_default, NULL},
      {"open", NULL, Open, NULL, NULL, NULL, napi_default, NULL},
      {"sivKey", NULL, SivKey, NULL, NULL, NULL, napi_default, NULL},
      {"sivSeal", NULL, SivSeal, NULL, NULL, NULL, napi_default, NULL},
      {"sivOpen", NULL, SivOpen, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
