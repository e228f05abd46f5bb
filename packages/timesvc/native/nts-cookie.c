/*
 * NTS cookie AES-256-GCM and authenticator AES-SIV for JavaScript (docs/nts.md "Cookies",
 * docs/performance.md "NTS request" and "AES-SIV"): N-API wrappers over native/nts-crypto.c. The same
 * cookie layout and the same output bytes as the node:crypto and hand-written paths, which stay as the
 * fallback where the addon is not built (domain/nts-cookies.ts, protocol/aes-siv.ts).
 */
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nts-crypto.h"

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

static void finalize_gcm(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  nc_gcm_free((nc_gcm_t *)data);
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
  nc_gcm_t *g = nc_gcm_new(key);
  if (!g) {
    napi_throw_error(env, NULL, "AES-256-GCM context");
    return NULL;
  }
  napi_value handle;
  napi_create_external(env, g, finalize_gcm, NULL, &handle);
  return handle;
}

static nc_gcm_t *gcm_of(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "not a cookie key");
    return NULL;
  }
  return (nc_gcm_t *)p;
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
  nc_gcm_t *g = argc >= 4 ? gcm_of(env, argv[0]) : NULL;
  if (!g || !bytes(env, argv[1], &out, &out_len) || napi_get_value_int32(env, argv[2], &offset) != napi_ok ||
      offset < 0 || (size_t)offset + NC_COOKIE_LENGTH > out_len || !bytes(env, argv[3], &plain, &plain_len) ||
      plain_len != NC_PLAIN_LENGTH) {
    if (g) napi_throw_type_error(env, NULL, "seal(handle, out, offset, plain)");
    return NULL;
  }
  if (!nc_gcm_seal(g, out + offset, plain)) {
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
  nc_gcm_t *g = argc >= 3 ? gcm_of(env, argv[0]) : NULL;
  if (!g || !bytes(env, argv[1], &c, &c_len) || c_len != NC_COOKIE_LENGTH || !bytes(env, argv[2], &plain, &plain_len) ||
      plain_len != NC_PLAIN_LENGTH) {
    if (g) napi_throw_type_error(env, NULL, "open(handle, cookie, plain)");
    return NULL;
  }
  napi_value result;
  napi_get_boolean(env, nc_gcm_open(g, c, plain), &result);
  return result;
}

static void finalize_siv(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  nc_siv_free((nc_siv_t *)data);
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
  nc_siv_t *s = nc_siv_new(key);
  if (!s) {
    napi_get_undefined(env, &result);
    return result;
  }
  napi_create_external(env, s, finalize_siv, NULL, &result);
  return result;
}

static nc_siv_t *siv_of(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || !p) {
    napi_throw_type_error(env, NULL, "not a SIV key");
    return NULL;
  }
  return (nc_siv_t *)p;
}

/* sivSeal(handle, ad, nonce, plain, out) -> length written to out (16 + plain.length): V ‖ C. */
static napi_value SivSeal(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  uint8_t *ad, *nonce, *plain, *out;
  size_t ad_len, nonce_len, plain_len, out_len;
  nc_siv_t *s = argc >= 5 ? siv_of(env, argv[0]) : NULL;
  if (!s || !bytes(env, argv[1], &ad, &ad_len) || !bytes(env, argv[2], &nonce, &nonce_len) ||
      !bytes(env, argv[3], &plain, &plain_len) || !bytes(env, argv[4], &out, &out_len) ||
      out_len < 16 + plain_len || ad_len > 65536 || plain_len > 65536) {
    if (s) napi_throw_type_error(env, NULL, "sivSeal(handle, ad, nonce, plain, out)");
    return NULL;
  }
  if (!nc_siv_seal(s, ad, ad_len, nonce, nonce_len, plain, plain_len, out)) {
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
  nc_siv_t *s = argc >= 5 ? siv_of(env, argv[0]) : NULL;
  if (!s || !bytes(env, argv[1], &ad, &ad_len) || !bytes(env, argv[2], &nonce, &nonce_len) ||
      !bytes(env, argv[3], &sealed, &sealed_len) || !bytes(env, argv[4], &plain, &plain_len) || sealed_len < 16 ||
      plain_len < sealed_len - 16 || ad_len > 65536 || sealed_len > 65536) {
    if (s) napi_throw_type_error(env, NULL, "sivOpen(handle, ad, nonce, sealed, plain)");
    return NULL;
  }
  napi_value result;
  napi_get_boolean(env, nc_siv_open(s, ad, ad_len, nonce, nonce_len, sealed, sealed_len, plain), &result);
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
