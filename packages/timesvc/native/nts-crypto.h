/*
 * The NTS cryptography of the addons, without N-API: AES-256-GCM cookies with the key schedule kept per
 * master key, and AES-SIV-CMAC-256 authenticators from a keyed template (docs/performance.md "AES-SIV",
 * docs/nts.md "Cookies"), on the OpenSSL inside the running Node. native/nts-cookie.c wraps them for
 * JavaScript; native/ntp-nts.c answers NTS requests with them on the native responder's thread. A context
 * is used by one thread at a time.
 */
#ifndef TIMESVC_NTS_CRYPTO_H
#define TIMESVC_NTS_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/* Cookie layout (docs/nts.md): key id u32 | nonce 12 | AES-256-GCM(plaintext 68) | tag 16. */
#define NC_COOKIE_LENGTH 100
#define NC_NONCE_AT 4
#define NC_NONCE_LENGTH 12
#define NC_CT_AT 16
#define NC_PLAIN_LENGTH 68
#define NC_TAG_AT 84
#define NC_TAG_LENGTH 16

typedef struct nc_gcm nc_gcm_t;
typedef struct nc_siv nc_siv_t;

/* A master key's contexts; NULL when OpenSSL fails. */
nc_gcm_t *nc_gcm_new(const uint8_t key[32]);
void nc_gcm_free(nc_gcm_t *g);
/* Encrypt plain (68) into the cookie whose key id and nonce are already written; 1 on success. */
int nc_gcm_seal(nc_gcm_t *g, uint8_t *cookie, const uint8_t *plain);
/* Decrypt and verify a 100-byte cookie into plain (68; zeroed when the tag fails); 1 when it verifies. */
int nc_gcm_open(nc_gcm_t *g, const uint8_t *cookie, uint8_t *plain);

/* An AES-SIV key (32 bytes: two AES-128 keys); NULL when this OpenSSL has no AES-SIV. */
nc_siv_t *nc_siv_new(const uint8_t key[32]);
void nc_siv_free(nc_siv_t *s);
/* V ‖ C of plain under (ad, nonce) as the two S2V components, into out (16 + plain_len); 1 on success. */
int nc_siv_seal(nc_siv_t *s, const uint8_t *ad, size_t ad_len, const uint8_t *nonce, size_t nonce_len,
                const uint8_t *plain, size_t plain_len, uint8_t *out);
/* Verify and decrypt sealed (V ‖ C) into plain (sealed_len - 16; zeroed on failure); 1 when V verifies. */
int nc_siv_open(nc_siv_t *s, const uint8_t *ad, size_t ad_len, const uint8_t *nonce, size_t nonce_len,
                const uint8_t *sealed, size_t sealed_len, uint8_t *plain);

#endif
