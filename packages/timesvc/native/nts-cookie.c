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

static int bytes(napi_env env, napi_value v, uint8_t **data, size_t *len) {
  napi_typedarray_type type;
  napi_value ab;
  size_t off;
  void *p;
  if (napi_get_typedarray_info(env, v, &type, len, &p, &ab, &off) != napi_ok || type != napi_uint8_array) return 0;
  *data = (uint8_t *)p;
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

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"key", NULL, Key, NULL, NULL, NULL, napi_default, NULL},
      {"seal", NULL, Seal, NULL, NULL, NULL, napi_default, NULL},
      {"open", NULL, Open, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
