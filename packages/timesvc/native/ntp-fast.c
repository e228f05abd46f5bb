/* The plain-NTP responder in C; see ntp-fast.h. Each function names the JavaScript it must agree with. */
#include "ntp-fast.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HEADER 48
#define TWO32 4294967296.0
#define KISS_RATE 0x52415445u /* "RATE" (RFC 5905 §7.4) */
#define KISS_DENY 0x44454e59u /* "DENY" */

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* secondsToShort (ntp-packet.ts): NTP short format, rounded, saturating; 0 for anything not > 0. */
static uint32_t seconds_to_short(double s) {
  if (!(s > 0)) return 0;
  double v = round(s * 65536.0); /* Math.round for a positive value (exact at halves, unlike floor(x + 0.5)) */
  return v >= 4294967295.0 ? 0xffffffffu : (uint32_t)v;
}

/* Whether the record holds IPv4 or IPv4-mapped IPv6; *v4 then points at the four address bytes. */
static int record_v4(const uint8_t *rec, const uint8_t **v4) {
  const uint8_t *a = rec + 4;
  if (rec[0] != 6) {
    *v4 = a;
    return 1;
  }
  for (int i = 0; i < 10; i++)
    if (a[i] != 0) return 0;
  if (a[10] != 0xff || a[11] != 0xff) return 0;
  *v4 = a + 12;
  return 1;
}

/* ---- Rate limiter (rate-limiter.ts RateLimiter.checkBytes) ---- */

int nf_limiter_init(nf_limiter_t *l, int enabled, double average_interval_s, double burst, double kod_interval_s,
                    int32_t max_clients, int32_t ipv6_prefix) {
  memset(l, 0, sizeof *l);
  l->enabled = enabled;
  l->oldest = l->newest = -1;
  /* The table is kept when limiting is off: it is the client log (rate-limiter.ts `enabled`). No limiter
   * at all (policyArray's maxClients 0): no table, every request allowed and unlogged. */
  if (max_clients < 1) {
    l->enabled = 0;
    return 0;
  }
  l->burst = burst;
  l->refill_per_ms = 1.0 / (average_interval_s * 1000.0);
  l->kod_ms = kod_interval_s * 1000.0;
  l->max_clients = max_clients;
  l->ipv6_prefix = ipv6_prefix < 0 ? 0 : ipv6_prefix > 128 ? 128 : ipv6_prefix;
  /* Grown on demand up to max_clients: memory follows the clients actually seen. */
  l->capacity = l->max_clients < 1024 ? l->max_clients : 1024;
  l->buckets = malloc(sizeof(nf_bucket_t) * (size_t)l->capacity);
  uint32_t size = 16;
  while (size < (uint32_t)l->capacity * 2u) size <<= 1;
  l->table = malloc(sizeof(int32_t) * size);
  if (!l->buckets || !l->table) {
    nf_limiter_free(l);
    return -1;
  }
  memset(l->table, 0xff, sizeof(int32_t) * size);
  l->mask = size - 1;
  return 0;
}

void nf_limiter_free(nf_limiter_t *l) {
  free(l->buckets);
  free(l->table);
  l->buckets = NULL;
  l->table = NULL;
  l->count = l->capacity = 0;
}

static int key_len(const uint8_t *key) { return key[0] == 4 ? 5 : 17; }

static uint32_t key_hash(const uint8_t *key) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (int i = 0, n = key_len(key); i < n; i++) h = (h ^ key[i]) * 16777619u;
  return h;
}

/* The bucket key: IPv4 (and IPv4-mapped) as the address, IPv6 as the configured prefix (keyOfBytes). */
static void make_key(const nf_limiter_t *l, const uint8_t *rec, uint8_t *key) {
  const uint8_t *v4;
  memset(key, 0, 17);
  if (record_v4(rec, &v4)) {
    key[0] = 4;
    memcpy(key + 1, v4, 4);
    return;
  }
  key[0] = 6;
  for (int i = 0; i < 16; i++) {
    int keep = l->ipv6_prefix - i * 8;
    keep = keep < 0 ? 0 : keep > 8 ? 8 : keep;
    key[1 + i] = keep == 0 ? 0 : (uint8_t)(rec[4 + i] & (0xff << (8 - keep)));
  }
}

static int32_t table_find(const nf_limiter_t *l, const uint8_t *key, uint32_t *slot) {
  uint32_t i = key_hash(key) & l->mask;
  for (;;) {
    int32_t b = l->table[i];
    if (b < 0) {
      *slot = i;
      return -1;
    }
    if (memcmp(l->buckets[b].key, key, (size_t)key_len(key)) == 0) {
      *slot = i;
      return b;
    }
    i = (i + 1) & l->mask;
  }
}

/* Remove the entry at table slot `i`, shifting back the probe chain behind it (no tombstones). */
static void table_remove(nf_limiter_t *l, uint32_t i) {
  uint32_t j = i;
  for (;;) {
    l->table[i] = -1;
    for (;;) {
      j = (j + 1) & l->mask;
      int32_t b = l->table[j];
      if (b < 0) return;
      uint32_t home = key_hash(l->buckets[b].key) & l->mask;
      /* Leave b where it is if its home lies cyclically in (i, j]. */
      if (i <= j ? (i < home && home <= j) : (i < home || home <= j)) continue;
      l->table[i] = b;
      i = j;
      break;
    }
  }
}

static void lru_unlink(nf_limiter_t *l, int32_t b) {
  nf_bucket_t *x = &l->buckets[b];
  if (x->prev >= 0) l->buckets[x->prev].next = x->next;
  else l->oldest = x->next;
  if (x->next >= 0) l->buckets[x->next].prev = x->prev;
  else l->newest = x->prev;
}

static void lru_append(nf_limiter_t *l, int32_t b) {
  nf_bucket_t *x = &l->buckets[b];
  x->prev = l->newest;
  x->next = -1;
  if (l->newest >= 0) l->buckets[l->newest].next = b;
  else l->oldest = b;
  l->newest = b;
}

/* Double the bucket array and the table (rehashing), up to max_clients; 0 when memory ran out. */
static int limiter_grow(nf_limiter_t *l) {
  int32_t cap = l->capacity * 2 > l->max_clients ? l->max_clients : l->capacity * 2;
  nf_bucket_t *nb = realloc(l->buckets, sizeof(nf_bucket_t) * (size_t)cap);
  if (!nb) return 0;
  l->buckets = nb;
  uint32_t size = l->mask + 1;
  while (size < (uint32_t)cap * 2u) size <<= 1;
  if (size != l->mask + 1) {
    int32_t *nt = malloc(sizeof(int32_t) * size);
    if (!nt) return 0;
    memset(nt, 0xff, sizeof(int32_t) * size);
    for (int32_t b = l->oldest; b >= 0; b = l->buckets[b].next) {
      uint32_t i = key_hash(l->buckets[b].key) & (size - 1);
      while (nt[i] >= 0) i = (i + 1) & (size - 1);
      nt[i] = b;
    }
    free(l->table);
    l->table = nt;
    l->mask = size - 1;
  }
  l->capacity = cap;
  return 1;
}

/* ---- Client log (client-log.ts; chrony's clientlog.c update_record) ---- */

#define RATE_SCALE 4
#define MIN_RATE (-14 * RATE_SCALE)

/* client-log.ts scaledLog2: the interval (1/16 s) as a log2 scaled by RATE_SCALE, rounded. */
static int scaled_log2(int64_t interval) {
  if (interval == 0) return -RATE_SCALE * 5;
  int64_t v = interval + interval / 2;
  int interval2 = -RATE_SCALE * 4;
  for (; interval2 < -MIN_RATE; interval2 += RATE_SCALE) {
    if (v <= 1) break;
    v /= 2;
  }
  return interval2;
}

/* client-log.ts averaged. */
static int averaged(int rate, int interval2) {
  if (rate == NF_INVALID_RATE) return -interval2;
  if (rate < -interval2) return rate + 1;
  if (rate > -interval2) {
    if (rate > RATE_SCALE * 5 / 2 - interval2) return RATE_SCALE * 5 / 2 - interval2;
    return (rate - interval2 - 1) / 2;
  }
  return rate;
}

/* client-log.ts logRequest. */
static void log_request(nf_bucket_t *x, double now_ms, int decision, int denied) {
  int64_t now = (int64_t)floor(now_ms * 16.0 / 1000.0);
  int64_t prev = x->last_ts;
  x->last_ts = now;
  x->hits++;
  if (prev >= 0 && now >= prev) {
    int interval2 = scaled_log2(now - prev);
    if (x->dropped) x->timeout_rate = averaged(x->timeout_rate, interval2);
    else x->rate = averaged(x->rate, interval2);
  }
  x->dropped = decision == 2;
  if (decision == 2) x->drops++;
  else if (decision == 1) x->kod_rate++;
  else if (denied) x->kod_deny++;
}

static int limiter_decide(nf_limiter_t *l, nf_bucket_t *x, double now_ms) {
  if (!l->enabled) return 0;
  if (x->tokens >= 1) {
    x->tokens -= 1;
    return 0;
  }
  if (now_ms - x->last_kod_ms >= l->kod_ms) {
    x->last_kod_ms = now_ms;
    return 1;
  }
  return 2;
}

int nf_limiter_snapshot(const nf_limiter_t *l, nf_client_t *out, int max) {
  int n = 0;
  for (int32_t b = l->newest; b >= 0 && n < max; b = l->buckets[b].prev, n++) {
    const nf_bucket_t *x = &l->buckets[b];
    memcpy(out[n].key, x->key, 17);
    out[n].hits = (double)x->hits;
    out[n].drops = (double)x->drops;
    out[n].kod_rate = (double)x->kod_rate;
    out[n].kod_deny = (double)x->kod_deny;
    out[n].last_ts = (double)x->last_ts;
    out[n].rate = x->rate;
    out[n].timeout_rate = x->timeout_rate;
  }
  return n;
}

int nf_limiter_check(nf_limiter_t *l, const uint8_t *rec, double now_ms, int denied) {
  if (!l->buckets) return 0;
  uint8_t key[17];
  make_key(l, rec, key);
  uint32_t slot;
  int32_t b = table_find(l, key, &slot);
  nf_bucket_t *x;
  if (b < 0) {
    if (l->count >= l->max_clients) {
      /* Evict the least recently seen client and reuse its bucket. */
      int32_t old = l->oldest;
      uint32_t oslot;
      table_find(l, l->buckets[old].key, &oslot);
      table_remove(l, oslot);
      lru_unlink(l, old);
      b = old;
      table_find(l, key, &slot); /* the removal may have moved the free slot */
    } else {
      if (l->count >= l->capacity && !limiter_grow(l)) return 0;
      b = l->count++;
      table_find(l, key, &slot); /* the table may have been rebuilt */
    }
    x = &l->buckets[b];
    memcpy(x->key, key, 17);
    x->tokens = l->burst;
    x->last_ms = now_ms;
    x->last_kod_ms = -INFINITY;
    x->hits = x->drops = x->kod_rate = x->kod_deny = 0;
    x->last_ts = -1;
    x->rate = x->timeout_rate = NF_INVALID_RATE;
    x->dropped = 0;
    l->table[slot] = b;
    lru_append(l, b);
  } else {
    x = &l->buckets[b];
    lru_unlink(l, b);
    lru_append(l, b);
    double elapsed = now_ms - x->last_ms;
    if (elapsed < 0) elapsed = 0;
    double t = x->tokens + elapsed * l->refill_per_ms;
    x->tokens = t < l->burst ? t : l->burst;
    x->last_ms = now_ms;
  }
  int decision = limiter_decide(l, x, now_ms);
  log_request(x, now_ms, decision, denied);
  return decision;
}

/* ---- Access list (access-list.ts AccessList.allows, node:net BlockList semantics) ---- */

static int prefix_match(const uint8_t *a, const uint8_t *net, int bits) {
  int whole = bits / 8, rest = bits % 8;
  if (memcmp(a, net, (size_t)whole) != 0) return 0;
  if (rest == 0) return 1;
  uint8_t m = (uint8_t)(0xff << (8 - rest));
  return (a[whole] & m) == (net[whole] & m);
}

int nf_access_allows(const nf_policy_t *p, const uint8_t *rec) {
  if (p->count == 0) return 1;
  const uint8_t *v4;
  int is4 = record_v4(rec, &v4);
  /* An IPv4 source is also compared with IPv6 networks as ::ffff:a.b.c.d, as BlockList does. */
  uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0};
  if (is4) memcpy(mapped + 12, v4, 4);
  for (int i = 0; i < p->count; i++) {
    const nf_network_t *n = &p->networks[i];
    if (n->family == 4) {
      if (is4 && prefix_match(v4, n->addr, n->prefix)) return 1;
    } else if (prefix_match(is4 ? mapped : rec + 4, n->addr, n->prefix)) {
      return 1;
    }
  }
  return 0;
}

/* ---- The request (ntp-responder.ts respondInto, ntp-packet.ts scanTrailer) ---- */

int nf_scan_trailer(const uint8_t *buf, int length) {
  int at = HEADER;
  while (at < length) {
    int remaining = length - at;
    if (remaining == 20 || remaining == 24) return 1;
    if (remaining == 4 && (buf[at] | buf[at + 1] | buf[at + 2] | buf[at + 3]) == 0) return 1;
    if (remaining < 4) return 2;
    int field = (buf[at + 2] << 8) | buf[at + 3];
    if (field < 4 || field % 4 != 0 || field > remaining) return 2;
    at += field;
  }
  return 0;
}

/* RFC 5905 §7.4 kiss: mode 4, LI 3, stratum 0, refid = code, origin = the client's transmit timestamp. */
static void kiss(const uint8_t *buf, int version, uint32_t code, uint8_t *out) {
  memset(out, 0, HEADER);
  out[0] = (uint8_t)((3 << 6) | (version << 3) | 4);
  out[2] = buf[2];
  put_u32(out + 12, code);
  memcpy(out + 24, buf + 40, 8);
}

int nf_decide(const uint8_t *buf, int length, const uint8_t *rec, double at_ms, const nf_served_t *s,
              nf_policy_t *p, uint8_t *out) {
  if (length < HEADER) return NF_DROP_SHORT;
  int version = (buf[0] >> 3) & 7;
  if ((buf[0] & 7) != 3) return NF_DROP_NOT_CLIENT;
  if (version < 1 || version > 4) return NF_DROP_BAD_VERSION;
  if (length > HEADER) {
    int t = nf_scan_trailer(buf, length);
    if (t == 1) return NF_DROP_AUTHENTICATED;
    if (t == 2) return NF_DROP_MALFORMED;
  }
  int denied = !nf_access_allows(p, rec);
  int rate = nf_limiter_check(&p->limiter, rec, at_ms, denied);
  if (rate == 2) return NF_DROP_RATE_LIMITED;
  if (rate == 1) {
    kiss(buf, version, KISS_RATE, out);
    return NF_KOD_RATE;
  }
  if (denied) {
    kiss(buf, version, KISS_DENY, out);
    return NF_KOD_DENY;
  }
  out[0] = (uint8_t)(((s->leap & 3) << 6) | (version << 3) | 4);
  out[1] = (uint8_t)s->stratum;
  out[2] = buf[2]; /* poll echoed */
  out[3] = (uint8_t)(s->precision & 0xff);
  put_u32(out + 4, seconds_to_short(s->root_delay_s));
  double since = at_ms - s->updated_ms;
  if (since < 0) since = 0;
  put_u32(out + 8, seconds_to_short(s->disp_s + s->disp_rate * (since / 1000.0)));
  put_u32(out + 12, s->refid);
  put_u32(out + 16, s->ref_sec);
  put_u32(out + 20, s->ref_frac);
  memcpy(out + 24, buf + 40, 8); /* origin = the client's transmit timestamp (RFC 5905 §8) */
  memset(out + 32, 0, 16);
  return NF_REPLY;
}

/* ---- The served clock (served-clock.ts ServedClock.write, over one linear piece) ---- */

void nf_served_write(const nf_served_t *s, double perf_ms, uint8_t *out) {
  double ns = s->ns0 + (perf_ms - s->p0) * 1e6 * s->rate;
  double whole = floor(ns / 1e9);
  ns -= whole * 1e9;
  double seconds = fmod(s->sec0 + whole, TWO32);
  if (seconds < 0) seconds += TWO32;
  double fraction = floor(ns * TWO32 / 1e9);
  if (fraction > TWO32 - 1) fraction = TWO32 - 1;
  put_u32(out, (uint32_t)seconds);
  put_u32(out + 4, (uint32_t)fraction);
}
