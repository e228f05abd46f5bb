/*
 * Batched UDP receive and send for the NTP server (docs/performance.md "Batched socket path").
 *
 * Node's dgram layer costs, per request: one recvmsg() and one crossing into JavaScript, one SIOCGSTAMPNS
 * ioctl for the kernel receive timestamp (native/rx-timestamp.c), and one sendmsg() with its own crossing.
 * Here the addon owns the server socket: when libuv reports it readable (uv_poll), the addon takes up to
 * `batch` datagrams with one recvmmsg(2), each with its kernel receive timestamp from the SCM_TIMESTAMPNS
 * control message (socket(7) SO_TIMESTAMPNS), and calls JavaScript once with the count; JavaScript
 * answers them and hands the replies back for sendmmsg(2), and takes a further batch only while the
 * previous one was full.
 *
 * Memory is fixed at attach(): JavaScript allocates the shared arrays once and the addon keeps references;
 * nothing is allocated per datagram on either side. A datagram longer than a slot is marked truncated
 * (length -1) and costs the others nothing.
 *
 * Transmit timestamps (RFC 5905 §8 T3): for slots flagged by JavaScript, the addon writes bytes 40-47 of
 * the reply itself, immediately before each sendmmsg() chunk of at most TX_CHUNK datagrams, as the served
 * time JavaScript read just before the call plus the CLOCK_MONOTONIC time elapsed since the call began.
 *
 * Native responder (docs/performance.md "Native responder"): after startNative() the socket is no longer
 * watched by libuv but read by a thread of its own, which answers plain requests itself (ntp-fast.c: the
 * same decisions and bytes as the JavaScript responder, over the served clock handed over as one linear
 * piece) and queues the rest (requests with extension fields, anything while it has no valid piece of the
 * served clock) in a bounded ring for the JavaScript thread, which it wakes with uv_async_send(); JavaScript
 * then takes them from the ring with the same onBatch()/recv() as above.
 */
#define _GNU_SOURCE /* recvmmsg, sendmmsg */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <fcntl.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "ntp-fast.h"
#include "ntp-nts.h"

#define MAX_BATCH 256
#define ADDR_BYTES 24
/* Replies per sendmmsg() between two readings of the clock (bounds the T3 error, docs/performance.md). */
#define TX_CHUNK 8
/* Sealed NTS replies sent together: each one's T3 is read just before its own seal, then at most
 * NTS_TX_CHUNK - 1 further seals, and at most TX_CHUNK - 1 sends, come before it reaches the kernel
 * (docs/performance.md "The batched socket path"). */
#define NTS_TX_CHUNK 4
#define CTRL_BYTES 64
/* Datagrams the native thread may queue for JavaScript; more are dropped and counted (bounded memory). */
#define RING 512
/* A request closer than this to the end of the served clock's linear piece is left to JavaScript. */
#define PIECE_GUARD_MS 1.0
/* Kernel receive timestamps older than this (ms) are not used (src/io/kernel-rx-timestamp.ts RX_WINDOW_MS). */
#define RX_WINDOW_MS 500.0
#define RX_SLACK_MS 0.05

/*
 * The arrays JavaScript and this thread exchange are positional; each layout is written once, here, as a
 * list of (index name, JavaScript name), which makes both the C indexes and the names layout() returns.
 * src/io/native-served.ts holds the JavaScript side's names and refuses an addon whose layout() differs
 * (a build older than the sources), so the two cannot drift apart unnoticed.
 */

/* Counters of the native thread, in stats() order (src/io/native-served.ts NATIVE_STATS). */
#define STATS_LAYOUT(X)                                                                                     \
  X(ST_REQUESTS, "requests") X(ST_RESPONSES, "responses") X(ST_KOD_RATE, "kodRate")                       \
  X(ST_KOD_DENY, "kodDeny") X(ST_SEND_ERRORS, "sendErrors") X(ST_DROP_SHORT, "short")                     \
  X(ST_DROP_NOT_CLIENT, "not_client") X(ST_DROP_BAD_VERSION, "bad_version")                               \
  X(ST_DROP_MALFORMED, "malformed") X(ST_DROP_AUTHENTICATED, "authenticated")                             \
  X(ST_DROP_RATE_LIMITED, "rate_limited") X(ST_DROP_OVERLOAD, "overload") X(ST_FORWARDED, "forwarded")    \
  X(ST_KERNEL_REPLACED, "kernelReplaced") X(ST_BATCHES, "batches") X(ST_DATAGRAMS, "datagrams")           \
  X(ST_LARGEST, "largest") X(ST_NTS_AUTHENTIC, "ntsAuthentic")

/* The served array (src/io/native-served.ts SERVED_LAYOUT): the served clock's piece and the reply fields. */
#define SERVED_LAYOUT(X)                                                                                    \
  X(SF_VALID, "valid") X(SF_P0, "p0") X(SF_P1, "p1") X(SF_SEC0, "sec0") X(SF_NS0, "ns0")                  \
  X(SF_RATE, "rate") X(SF_LEAP, "leap") X(SF_STRATUM, "stratum") X(SF_PRECISION, "precision")             \
  X(SF_REFID, "referenceId") X(SF_REF_SEC, "referenceSeconds") X(SF_REF_FRAC, "referenceFraction")        \
  X(SF_ROOT_DELAY, "rootDelayS") X(SF_ROOT_DISPERSION, "rootDispersionS")                                 \
  X(SF_DISPERSION_RATE, "dispersionRateS") X(SF_UPDATED, "updatedAtMs")

/* The policy array (src/io/native-served.ts POLICY_LAYOUT): the rate limiter's options. */
#define POLICY_LAYOUT(X)                                                                                    \
  X(PF_RATE_LIMIT, "rateLimitEnabled") X(PF_AVERAGE_INTERVAL, "averageIntervalS") X(PF_BURST, "burst")    \
  X(PF_KOD_INTERVAL, "kodIntervalS") X(PF_MAX_CLIENTS, "maxClients") X(PF_IPV6_PREFIX, "ipv6PrefixBits")

#define LAYOUT_INDEX(id, name) id,
#define LAYOUT_NAME(id, name) name,
enum { STATS_LAYOUT(LAYOUT_INDEX) ST_COUNT };
enum { SERVED_LAYOUT(LAYOUT_INDEX) SERVED_FIELDS };
enum { POLICY_LAYOUT(LAYOUT_INDEX) POLICY_FIELDS };
static const char *const STATS_NAMES[] = {STATS_LAYOUT(LAYOUT_NAME)};
static const char *const SERVED_NAMES[] = {SERVED_LAYOUT(LAYOUT_NAME)};
static const char *const POLICY_NAMES[] = {POLICY_LAYOUT(LAYOUT_NAME)};

/* Everything the native thread owns; allocated by startNative(). */
typedef struct {
  pthread_t thread;
  int stop; /* set by native_stop() */
  int started;
  int64_t origin_ns;   /* CLOCK_MONOTONIC ns at which performance.now() reads 0 */
  int timestamps;
  double correction_ms;
  nf_policy_t policy;
  int nts_on;           /* the server answers NTS: extension fields go through ntp-nts.c */
  nn_t *nts;            /* NTS keys and sessions (nts_on) */
  pthread_mutex_t keys_lock; /* guards nts against setNtsKeys */
  uint8_t *big;         /* batch * slot: NTS replies */
  pthread_mutex_t lock; /* guards served, the ring indices */
  pthread_mutex_t log_lock; /* guards policy.limiter (the rate limiter and client log) against clients() */
  nf_served_t served;
  /* the thread's receive and send state */
  uint8_t *buf;         /* batch * slot */
  struct sockaddr_in6 names[MAX_BATCH];
  struct mmsghdr msgs[MAX_BATCH];
  struct iovec iov[MAX_BATCH];
  uint8_t ctrl[MAX_BATCH][CTRL_BYTES];
  uint8_t out[MAX_BATCH][48];
  struct mmsghdr tx_msgs[MAX_BATCH];
  struct iovec tx_iov[MAX_BATCH];
  uint8_t stamp_me[MAX_BATCH];
  /* the ring to JavaScript */
  uint8_t *ring_buf;    /* RING * slot */
  int32_t ring_len[RING];
  uint8_t ring_addr[RING][ADDR_BYTES];
  double ring_stamp[RING];
  struct sockaddr_in6 ring_name[RING];
  int ring_head, ring_count;
  uint64_t stats[ST_COUNT];
} native_t;

typedef struct {
  int fd;
  int batch;
  int slot;
  uint8_t *rx_buf;
  int32_t *rx_len;
  uint8_t *rx_addr;
  double *rx_stamp;
  uint8_t *tx_buf;
  int32_t *tx_len;
  int32_t *tx_from;
  uint8_t *tx_flags;
  napi_ref refs[9];
  napi_ref on_readable;
  napi_async_context async;
  napi_env env;
  uv_poll_t poll;
  int closing;
  native_t *native;
  uv_async_t async_wake;
  int open_handles; /* libuv handles still to close before the endpoint is freed */
  struct sockaddr_in6 names[MAX_BATCH];
  struct mmsghdr rx_msgs[MAX_BATCH];
  struct iovec rx_iov[MAX_BATCH];
  uint8_t ctrl[MAX_BATCH][CTRL_BYTES];
  struct mmsghdr tx_msgs[MAX_BATCH];
  struct iovec tx_iov[MAX_BATCH];
} endpoint_t;

static void throw_errno(napi_env env, const char *what, int err) {
  char msg[160];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_value code, text, error;
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &text);
  napi_create_int32(env, err, &code);
  napi_create_error(env, NULL, text, &error);
  napi_set_named_property(env, error, "errno", code);
  napi_throw(env, error);
}

static int get_i32(napi_env env, napi_value v, int32_t *out) {
  return napi_get_value_int32(env, v, out) == napi_ok;
}

/* bind(family 4|6, address, port, rcvbuf, timestamps) -> fd. A non-blocking UDP socket; IPv6 is v6-only. */
static napi_value Bind(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t family = 0, port = -1, rcvbuf = 0;
  bool stamps = false;
  char addr[64];
  size_t alen = 0;
  if (argc < 5 || !get_i32(env, argv[0], &family) || (family != 4 && family != 6) ||
      napi_get_value_string_utf8(env, argv[1], addr, sizeof addr, &alen) != napi_ok ||
      !get_i32(env, argv[2], &port) || port < 0 || port > 65535 || !get_i32(env, argv[3], &rcvbuf) ||
      napi_get_value_bool(env, argv[4], &stamps) != napi_ok) {
    napi_throw_type_error(env, NULL, "bind(family, address, port, rcvbuf, timestamps)");
    return NULL;
  }
  struct sockaddr_storage ss;
  socklen_t sl;
  memset(&ss, 0, sizeof ss);
  if (family == 4) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, addr, &a->sin_addr) != 1) {
      napi_throw_type_error(env, NULL, "not an IPv4 address");
      return NULL;
    }
    sl = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, addr, &a->sin6_addr) != 1) {
      napi_throw_type_error(env, NULL, "not an IPv6 address");
      return NULL;
    }
    sl = sizeof *a;
  }
  int fd = socket(family == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw_errno(env, "socket", errno);
    return NULL;
  }
  int one = 1;
  if (family == 6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf); /* capped by rmem_max */
  if (stamps && setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0) {
    int err = errno;
    close(fd);
    throw_errno(env, "SO_TIMESTAMPNS", err);
    return NULL;
  }
  if (bind(fd, (struct sockaddr *)&ss, sl) != 0) {
    int err = errno;
    close(fd);
    throw_errno(env, "bind", err);
    return NULL;
  }
  napi_value result;
  napi_create_int32(env, fd, &result);
  return result;
}

/* localPort(fd) -> the bound port. */
static napi_value LocalPort(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || !get_i32(env, argv[0], &fd) || fd < 0) {
    napi_throw_type_error(env, NULL, "fd");
    return NULL;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
    throw_errno(env, "getsockname", errno);
    return NULL;
  }
  int port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                     : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  napi_value result;
  napi_create_int32(env, port, &result);
  return result;
}

/* closeFd(fd): for a socket that was bound but never attached. */
static napi_value CloseFd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc >= 1 && get_i32(env, argv[0], &fd) && fd >= 0) close(fd);
  return NULL;
}

static int take_batch(endpoint_t *ep);
static void native_free(native_t *nv);

/* Take a batch (from the socket, or from the native thread's ring) and hand it to JavaScript. */
static void deliver(endpoint_t *ep) {
  if (ep->closing) return;
  /* The first batch is taken here, so a wake-up costs one crossing into JavaScript and none back for it. */
  int n = take_batch(ep); /* negative: -errno, for JavaScript to log */
  if (n == 0) return;
  napi_env env = ep->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value fn, global, result, arg;
  napi_get_reference_value(env, ep->on_readable, &fn);
  napi_get_global(env, &global);
  napi_create_int32(env, n, &arg);
  if (napi_make_callback(env, ep->async, global, fn, 1, &arg, &result) != napi_ok) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value ex;
      napi_get_and_clear_last_exception(env, &ex);
      napi_fatal_exception(env, ex);
    }
  }
  napi_close_handle_scope(env, scope);
  /* Whatever JavaScript left in the ring (it takes at most a few batches per wake-up) gets another turn. */
  if (ep->native && !ep->closing) {
    pthread_mutex_lock(&ep->native->lock);
    int left = ep->native->ring_count;
    pthread_mutex_unlock(&ep->native->lock);
    if (left > 0) uv_async_send(&ep->async_wake);
  }
}

static void on_poll(uv_poll_t *handle, int status, int events) {
  (void)events;
  (void)status; /* an error is seen by the next recv() */
  deliver((endpoint_t *)handle->data);
}

static void on_wake(uv_async_t *handle) { deliver((endpoint_t *)handle->data); }

static void on_closed(uv_handle_t *handle) {
  endpoint_t *ep = (endpoint_t *)handle->data;
  if (--ep->open_handles > 0) return;
  close(ep->fd);
  if (ep->native) native_free(ep->native);
  free(ep);
}

static void finalize_endpoint(napi_env env, void *data, void *hint) {
  /* The endpoint is freed by close(); the external only points at it. */
  (void)env;
  (void)data;
  (void)hint;
}

static int typed(napi_env env, napi_value v, napi_typedarray_type want, size_t min_len, void **data) {
  napi_typedarray_type type;
  size_t length;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, v, &type, &length, data, &ab, &off) != napi_ok) return 0;
  return type == want && length >= min_len;
}

/*
 * attach(fd, batch, slot, rxBuf u8[batch*slot], rxLen i32[batch], rxAddr u8[batch*24], rxStamp f64[batch],
 *        txBuf u8[batch*slot], txLen i32[batch], txFrom i32[batch], txFlags u8[batch], onReadable) -> handle
 */
static napi_value Attach(napi_env env, napi_callback_info info) {
  size_t argc = 12;
  napi_value argv[12];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t fd = -1, batch = 0, slot = 0;
  if (argc < 12 || !get_i32(env, argv[0], &fd) || fd < 0 || !get_i32(env, argv[1], &batch) || batch < 1 ||
      batch > MAX_BATCH || !get_i32(env, argv[2], &slot) || slot < 48 || slot > 65536) {
    napi_throw_type_error(env, NULL, "attach(fd, batch 1-256, slot 48-65536, ...)");
    return NULL;
  }
  endpoint_t *ep = calloc(1, sizeof *ep);
  if (!ep) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  ep->fd = fd;
  ep->batch = batch;
  ep->slot = slot;
  ep->env = env;
  int ok = typed(env, argv[3], napi_uint8_array, (size_t)batch * slot, (void **)&ep->rx_buf) &&
           typed(env, argv[4], napi_int32_array, batch, (void **)&ep->rx_len) &&
           typed(env, argv[5], napi_uint8_array, (size_t)batch * ADDR_BYTES, (void **)&ep->rx_addr) &&
           typed(env, argv[6], napi_float64_array, batch, (void **)&ep->rx_stamp) &&
           typed(env, argv[7], napi_uint8_array, (size_t)batch * slot, (void **)&ep->tx_buf) &&
           typed(env, argv[8], napi_int32_array, batch, (void **)&ep->tx_len) &&
           typed(env, argv[9], napi_int32_array, batch, (void **)&ep->tx_from) &&
           typed(env, argv[10], napi_uint8_array, batch, (void **)&ep->tx_flags);
  napi_valuetype fntype;
  napi_typeof(env, argv[11], &fntype);
  if (!ok || fntype != napi_function) {
    free(ep);
    napi_throw_type_error(env, NULL, "attach: shared arrays of the wrong type or size, or no callback");
    return NULL;
  }
  for (int i = 0; i < 8; i++) napi_create_reference(env, argv[3 + i], 1, &ep->refs[i]);
  napi_create_reference(env, argv[11], 1, &ep->on_readable);
  napi_value name;
  napi_create_string_utf8(env, "timesvc:ntp-mmsg", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &ep->async);
  for (int i = 0; i < batch; i++) {
    ep->rx_iov[i].iov_base = ep->rx_buf + (size_t)i * slot;
    ep->rx_iov[i].iov_len = (size_t)slot;
  }
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  int rc = uv_poll_init(loop, &ep->poll, fd);
  if (rc == 0) {
    ep->poll.data = ep;
    rc = uv_poll_start(&ep->poll, UV_READABLE, on_poll);
  }
  if (rc != 0) {
    for (int i = 0; i < 8; i++) napi_delete_reference(env, ep->refs[i]);
    napi_delete_reference(env, ep->on_readable);
    napi_async_destroy(env, ep->async);
    free(ep);
    napi_throw_error(env, NULL, uv_strerror(rc));
    return NULL;
  }
  napi_value handle;
  napi_create_external(env, ep, finalize_endpoint, NULL, &handle);
  return handle;
}

static endpoint_t *endpoint_of(napi_env env, napi_value v) {
  void *p = NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok || p == NULL) {
    napi_throw_type_error(env, NULL, "not an endpoint");
    return NULL;
  }
  endpoint_t *ep = (endpoint_t *)p;
  if (ep->closing) {
    napi_throw_error(env, NULL, "endpoint closed");
    return NULL;
  }
  return ep;
}

/*
 * Take up to `batch` waiting datagrams with one recvmmsg(). For each i < count: rxLen[i] = length or -1
 * (truncated: longer than a slot); rxAddr[i*24..]: family (4|6), 0, port (big-endian u16), address (4 or
 * 16 bytes), IPv6 scope id (u32, host order, at 20); rxStamp[i] = kernel receive time, Unix ms
 * (CLOCK_REALTIME), or NaN when the datagram carried none. Returns the count, 0 when none is waiting, or
 * -errno.
 */
/* The address record of a source (the layout above). */
static void fill_record(const struct sockaddr_in6 *name, uint8_t *a) {
  memset(a, 0, ADDR_BYTES);
  if (name->sin6_family == AF_INET) {
    const struct sockaddr_in *s = (const struct sockaddr_in *)name;
    a[0] = 4;
    memcpy(a + 2, &s->sin_port, 2);
    memcpy(a + 4, &s->sin_addr, 4);
  } else {
    a[0] = 6;
    memcpy(a + 2, &name->sin6_port, 2);
    memcpy(a + 4, &name->sin6_addr, 16);
    uint32_t scope = name->sin6_scope_id;
    memcpy(a + 20, &scope, 4);
  }
}

/* The kernel receive timestamp of a received message (SCM_TIMESTAMPNS), or 0 when it carried none. */
static int cmsg_stamp(struct msghdr *h, struct timespec *ts) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR(h, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
      memcpy(ts, CMSG_DATA(c), sizeof *ts);
      return 1;
    }
  }
  return 0;
}

/* One recvmmsg() into msgs[0..batch) over names, iov and ctrl; the count, 0 when none waits, or -errno. */
static int recv_into(int fd, int batch, struct mmsghdr *msgs, struct sockaddr_in6 *names, struct iovec *iov,
                     uint8_t (*ctrl)[CTRL_BYTES], int flags) {
  for (int i = 0; i < batch; i++) {
    struct msghdr *h = &msgs[i].msg_hdr;
    h->msg_name = &names[i];
    h->msg_namelen = sizeof names[i];
    h->msg_iov = &iov[i];
    h->msg_iovlen = 1;
    h->msg_control = ctrl[i];
    h->msg_controllen = CTRL_BYTES;
    h->msg_flags = 0;
  }
  int n;
  do {
    n = recvmmsg(fd, msgs, (unsigned)batch, flags, NULL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  return n;
}

static int drain_ring(endpoint_t *ep);

static int take_batch(endpoint_t *ep) {
  if (ep->native) return drain_ring(ep);
  int n = recv_into(ep->fd, ep->batch, ep->rx_msgs, ep->names, ep->rx_iov, ep->ctrl, MSG_DONTWAIT);
  for (int i = 0; i < n; i++) {
    struct msghdr *h = &ep->rx_msgs[i].msg_hdr;
    ep->rx_len[i] = (h->msg_flags & MSG_TRUNC) ? -1 : (int32_t)ep->rx_msgs[i].msg_len;
    fill_record(&ep->names[i], ep->rx_addr + (size_t)i * ADDR_BYTES);
    struct timespec ts;
    ep->rx_stamp[i] = cmsg_stamp(h, &ts) ? (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6 : 0.0 / 0.0;
  }
  return n;
}

/* ---- The native thread ---- */

#define STAT_ADD(nv, k, v) __atomic_store_n(&(nv)->stats[k], (nv)->stats[k] + (uint64_t)(v), __ATOMIC_RELAXED)

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Copy received datagram i of the thread's batch into the ring for JavaScript; 0 when the ring is full. */
static int ring_put(endpoint_t *ep, native_t *nv, int i, int32_t len, const uint8_t *rec, double stamp_ms) {
  pthread_mutex_lock(&nv->lock);
  if (nv->ring_count >= RING) {
    pthread_mutex_unlock(&nv->lock);
    return 0;
  }
  int at = (nv->ring_head + nv->ring_count) % RING;
  pthread_mutex_unlock(&nv->lock);
  /* Only this thread writes slot `at` until ring_count covers it, so the copy runs outside the lock. */
  if (len > 0) memcpy(nv->ring_buf + (size_t)at * ep->slot, nv->buf + (size_t)i * ep->slot, (size_t)len);
  nv->ring_len[at] = len;
  memcpy(nv->ring_addr[at], rec, ADDR_BYTES);
  nv->ring_stamp[at] = stamp_ms;
  nv->ring_name[at] = nv->names[i];
  pthread_mutex_lock(&nv->lock);
  nv->ring_count++;
  pthread_mutex_unlock(&nv->lock);
  return 1;
}

/* JavaScript's side of the ring: up to `batch` queued datagrams into the shared rx arrays. */
static int drain_ring(endpoint_t *ep) {
  native_t *nv = ep->native;
  pthread_mutex_lock(&nv->lock);
  int n = nv->ring_count < ep->batch ? nv->ring_count : ep->batch;
  int head = nv->ring_head;
  pthread_mutex_unlock(&nv->lock);
  for (int k = 0; k < n; k++) {
    int at = (head + k) % RING;
    int32_t len = nv->ring_len[at];
    if (len > 0) memcpy(ep->rx_buf + (size_t)k * ep->slot, nv->ring_buf + (size_t)at * ep->slot, (size_t)len);
    ep->rx_len[k] = len;
    memcpy(ep->rx_addr + (size_t)k * ADDR_BYTES, nv->ring_addr[at], ADDR_BYTES);
    ep->rx_stamp[k] = nv->ring_stamp[at];
    ep->names[k] = nv->ring_name[at];
  }
  pthread_mutex_lock(&nv->lock);
  nv->ring_head = (head + n) % RING;
  nv->ring_count -= n;
  pthread_mutex_unlock(&nv->lock);
  return n;
}

/*
 * Send the replies queued in tx_msgs[0, count), in chunks of TX_CHUNK; the plain ones (stamp_me) get
 * their transmit timestamp (RFC 5905 §8 T3) read for their chunk, just before it.
 */
static void flush(endpoint_t *ep, native_t *nv, const nf_served_t *sv, int count) {
  int at = 0;
  while (at < count) {
    int chunk = count - at < TX_CHUNK ? count - at : TX_CHUNK;
    double t3 = (double)(clock_ns(CLOCK_MONOTONIC) - nv->origin_ns) / 1e6;
    int lost = 0;
    for (int k = at; k < at + chunk; k++) {
      if (!nv->stamp_me[k]) continue;
      if (t3 >= sv->p1) {
        /* The piece ended between arrival and sending (a descheduled thread at a break of the served
         * clock): the reply would carry a wrong T3, so it is not sent; the client asks again. */
        nv->tx_iov[k].iov_len = 0;
        lost++;
        continue;
      }
      nf_served_write(sv, t3, (uint8_t *)nv->tx_iov[k].iov_base + 40);
      STAT_ADD(nv, ST_RESPONSES, 1);
    }
    if (lost > 0) {
      /* Rare: the others of this chunk go one by one. */
      for (int k = at; k < at + chunk; k++) {
        if (nv->tx_iov[k].iov_len == 0) continue;
        if (sendmsg(ep->fd, &nv->tx_msgs[k].msg_hdr, MSG_DONTWAIT) < 0) STAT_ADD(nv, ST_SEND_ERRORS, 1);
      }
      STAT_ADD(nv, ST_SEND_ERRORS, lost);
      at += chunk;
      continue;
    }
    int r;
    do {
      r = sendmmsg(ep->fd, nv->tx_msgs + at, (unsigned)chunk, MSG_DONTWAIT);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
        STAT_ADD(nv, ST_SEND_ERRORS, count - at); /* send buffer full: the rest is dropped */
        break;
      }
      STAT_ADD(nv, ST_SEND_ERRORS, 1);
      at++;
      continue;
    }
    at += r;
  }
}

/* Queue reply `out` (at `data`, `len` bytes) to the source of received datagram i. */
static void queue_reply(native_t *nv, int out, int i, uint8_t *data, int len, int stamp) {
  struct msghdr *t = &nv->tx_msgs[out].msg_hdr;
  memset(t, 0, sizeof *t);
  t->msg_name = &nv->names[i];
  t->msg_namelen = nv->names[i].sin6_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  nv->tx_iov[out].iov_base = data;
  nv->tx_iov[out].iov_len = (size_t)len;
  t->msg_iov = &nv->tx_iov[out];
  t->msg_iovlen = 1;
  nv->stamp_me[out] = (uint8_t)stamp;
}

/*
 * One batch on the native thread: decide about each datagram (ntp-fast.c), answer plain requests with the
 * served clock's piece, queue what JavaScript must answer, and send the replies in chunks of TX_CHUNK,
 * each chunk's transmit timestamps read just before its sendmmsg(). Returns the batch's size or -errno.
 */
static int native_batch(endpoint_t *ep, native_t *nv) {
  /* Blocks for the first datagram (the thread's socket is blocking), then takes what is waiting. */
  int n = recv_into(ep->fd, ep->batch, nv->msgs, nv->names, nv->iov, nv->ctrl, MSG_WAITFORONE);
  if (n <= 0) return n;
  int64_t real_ns = clock_ns(CLOCK_REALTIME);
  double now = (double)(clock_ns(CLOCK_MONOTONIC) - nv->origin_ns) / 1e6;
  nf_served_t sv;
  pthread_mutex_lock(&nv->lock);
  sv = nv->served;
  pthread_mutex_unlock(&nv->lock);
  STAT_ADD(nv, ST_BATCHES, 1);
  STAT_ADD(nv, ST_DATAGRAMS, n);
  if ((uint64_t)n > nv->stats[ST_LARGEST]) __atomic_store_n(&nv->stats[ST_LARGEST], (uint64_t)n, __ATOMIC_RELAXED);
  STAT_ADD(nv, ST_REQUESTS, n);
  int out = 0, forwarded = 0, sealed_queued = 0;
  for (int i = 0; i < n; i++) {
    struct msghdr *h = &nv->msgs[i].msg_hdr;
    if (h->msg_flags & MSG_TRUNC) {
      STAT_ADD(nv, ST_DROP_MALFORMED, 1); /* longer than a slot */
      continue;
    }
    int32_t len = (int32_t)nv->msgs[i].msg_len;
    /* The arrival time on the perf scale: the kernel's timestamp carried over by its age (the rule of
     * kernel-rx-timestamp.ts: within [read - RX_WINDOW_MS, read]), else the reading just taken. */
    double at = now - nv->correction_ms;
    double stamp_ms = 0.0 / 0.0;
    if (nv->timestamps) {
      struct timespec ts;
      at = now;
      if (cmsg_stamp(h, &ts)) {
        int64_t k = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        stamp_ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
        double age = (double)(real_ns - k) / 1e6;
        if (age >= -RX_SLACK_MS && age <= RX_WINDOW_MS) at = now - age;
        else STAT_ADD(nv, ST_KERNEL_REPLACED, 1);
      } else {
        STAT_ADD(nv, ST_KERNEL_REPLACED, 1);
      }
    }
    uint8_t rec[ADDR_BYTES];
    fill_record(&nv->names[i], rec);
    const uint8_t *req = nv->buf + (size_t)i * ep->slot;
    pthread_mutex_lock(&nv->log_lock);
    int code = nf_decide(req, len, rec, at, &sv, &nv->policy, nv->out[out]);
    pthread_mutex_unlock(&nv->log_lock);
    if (code >= NF_DROP_SHORT) {
      STAT_ADD(nv, ST_DROP_SHORT + (code - NF_DROP_SHORT), 1);
      continue;
    }
    if (code == NF_KOD_RATE || code == NF_KOD_DENY) {
      STAT_ADD(nv, code == NF_KOD_RATE ? ST_KOD_RATE : ST_KOD_DENY, 1);
      queue_reply(nv, out, i, nv->out[out], 48, 0);
      out++;
      continue;
    }
    int plain = sv.valid && at >= sv.p0 && at < sv.p1 - PIECE_GUARD_MS;
    if (plain && len > 48 && nv->nts_on) {
      /* Extension fields with NTS on: an authentic NTS request is answered here (ntp-nts.c); anything
       * else NTS is JavaScript's; other fields get a plain reply, as in JavaScript. */
      nn_reply_t r;
      uint8_t *big = nv->big + (size_t)out * ep->slot;
      pthread_mutex_lock(&nv->keys_lock);
      int k = nn_check(nv->nts, req, len, at, &r);
      if (k == NN_AUTHENTIC) {
        double t3 = (double)(clock_ns(CLOCK_MONOTONIC) - nv->origin_ns) / 1e6;
        int sealed = 0;
        if (t3 < sv.p1 && r.length <= ep->slot) {
          memcpy(big, nv->out[out], 48);
          nf_served_write(&sv, at, big + 32);
          /* The transmit timestamp is inside the authenticated data: written just before sealing. */
          nf_served_write(&sv, t3, big + 40);
          sealed = nn_seal(nv->nts, &r, req, big);
        }
        pthread_mutex_unlock(&nv->keys_lock);
        if (sealed > 0) {
          STAT_ADD(nv, ST_RESPONSES, 1);
          STAT_ADD(nv, ST_NTS_AUTHENTIC, 1);
          queue_reply(nv, out++, i, big, sealed, 0);
          /* Sent with what is queued before it once NTS_TX_CHUNK are sealed (or the batch ends): at most
           * NTS_TX_CHUNK - 1 seals after this one's T3, one sendmmsg() for them instead of one each. */
          if (++sealed_queued >= NTS_TX_CHUNK) {
            flush(ep, nv, &sv, out);
            out = 0;
            sealed_queued = 0;
          }
          continue;
        }
        plain = 0; /* the piece ended, or sealing failed: JavaScript answers */
      } else {
        pthread_mutex_unlock(&nv->keys_lock);
        if (k == NN_FORWARD) plain = 0;
      }
    }
    if (!plain) {
      /* No piece of the served clock for this instant, or NTS that JavaScript decides: queued for it.
       * The policy (rate limit, access list) has been applied here, once. */
      if (ring_put(ep, nv, i, len, rec, stamp_ms)) {
        STAT_ADD(nv, ST_FORWARDED, 1);
        forwarded++;
      } else {
        STAT_ADD(nv, ST_DROP_OVERLOAD, 1);
      }
      continue;
    }
    nf_served_write(&sv, at, nv->out[out] + 32); /* receive timestamp */
    queue_reply(nv, out, i, nv->out[out], 48, 1);
    out++;
    if (sealed_queued > 0 && out >= TX_CHUNK) {
      /* A sealed reply waits behind at most TX_CHUNK - 1 others, as a plain one of a chunk does. */
      flush(ep, nv, &sv, out);
      out = 0;
      sealed_queued = 0;
    }
  }
  if (forwarded > 0) uv_async_send(&ep->async_wake);
  flush(ep, nv, &sv, out);
  return n;
}

/*
 * The thread: blocked in recvmmsg(MSG_WAITFORONE) on the socket made blocking, so a wake-up costs one
 * system call in and one out (sendmmsg), as chronyd's select() + recvmsg() + sendmsg() loop costs three.
 * native_stop() sets `stop` and wakes it with shutdown(SHUT_RD), which ends a blocked receive on a UDP
 * socket (recvmmsg returns 0); SO_RCVTIMEO (60 s) bounds the wait should that not happen.
 */
static void *native_main(void *arg) {
  endpoint_t *ep = arg;
  native_t *nv = ep->native;
  while (!__atomic_load_n(&nv->stop, __ATOMIC_ACQUIRE)) {
    int n = native_batch(ep, nv);
    if (n < 0 && n != -EAGAIN && n != -EWOULDBLOCK && n != -EINTR) {
      struct pollfd none = {-1, 0, 0};
      poll(&none, 1, 10); /* an unexpected receive error: back off rather than spin */
    }
  }
  return NULL;
}

static int get_f64s(napi_env env, napi_value v, size_t need, double **out) {
  return typed(env, v, napi_float64_array, need, (void **)out);
}

/* Served-clock piece and reply fields from JavaScript (setServed's array) into `s`. */
static void served_from(const double *a, nf_served_t *s) {
  s->valid = a[SF_VALID] != 0;
  s->p0 = a[SF_P0];
  s->p1 = a[SF_P1];
  s->sec0 = a[SF_SEC0];
  s->ns0 = a[SF_NS0];
  s->rate = a[SF_RATE];
  s->leap = (int)a[SF_LEAP];
  s->stratum = (int)a[SF_STRATUM];
  s->precision = (int)a[SF_PRECISION];
  s->refid = (uint32_t)a[SF_REFID];
  s->ref_sec = (uint32_t)a[SF_REF_SEC];
  s->ref_frac = (uint32_t)a[SF_REF_FRAC];
  s->root_delay_s = a[SF_ROOT_DELAY];
  s->disp_s = a[SF_ROOT_DISPERSION];
  s->disp_rate = a[SF_DISPERSION_RATE];
  s->updated_ms = a[SF_UPDATED];
}

/* Allowed networks from JavaScript: records of 18 bytes (family, prefix, 16 address bytes). */
static int networks_from(napi_env env, napi_value v, nf_policy_t *p) {
  uint8_t *data = NULL;
  napi_typedarray_type type;
  size_t length = 0, off;
  napi_value ab;
  if (napi_get_typedarray_info(env, v, &type, &length, (void **)&data, &ab, &off) != napi_ok ||
      type != napi_uint8_array || length % 18 != 0)
    return 0;
  p->count = (int)(length / 18);
  p->networks = p->count ? calloc((size_t)p->count, sizeof(nf_network_t)) : NULL;
  if (p->count && !p->networks) return 0;
  for (int i = 0; i < p->count; i++) {
    p->networks[i].family = data[i * 18];
    p->networks[i].prefix = data[i * 18 + 1];
    memcpy(p->networks[i].addr, data + i * 18 + 2, 16);
  }
  return 1;
}

/* Policy array (POLICY_LAYOUT). */
static int policy_from(napi_env env, napi_value params, napi_value networks, nf_policy_t *p) {
  double *a;
  memset(p, 0, sizeof *p);
  if (!get_f64s(env, params, POLICY_FIELDS, &a)) return 0;
  if (!networks_from(env, networks, p)) return 0;
  if (nf_limiter_init(&p->limiter, a[PF_RATE_LIMIT] != 0, a[PF_AVERAGE_INTERVAL], a[PF_BURST], a[PF_KOD_INTERVAL],
                      (int32_t)a[PF_MAX_CLIENTS], (int32_t)a[PF_IPV6_PREFIX]) != 0) {
    free(p->networks);
    return 0;
  }
  return 1;
}

static void policy_free(nf_policy_t *p) {
  nf_limiter_free(&p->limiter);
  free(p->networks);
  p->networks = NULL;
}

/*
 * startNative(handle, originNs bigint, options f64[2] [timestamps, rxCorrectionMs], policy f64[POLICY_FIELDS],
 *             networks u8[18*k], served f64[SERVED_FIELDS]): hand the socket to the native thread.
 */
static napi_value StartNative(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  endpoint_t *ep = argc >= 6 ? endpoint_of(env, argv[0]) : NULL;
  if (!ep) return NULL;
  if (ep->native) {
    napi_throw_error(env, NULL, "already native");
    return NULL;
  }
  int64_t origin = 0;
  bool lossless = false;
  double *opts, *served;
  native_t *nv = calloc(1, sizeof *nv);
  if (!nv || napi_get_value_bigint_int64(env, argv[1], &origin, &lossless) != napi_ok ||
      !get_f64s(env, argv[2], 3, &opts) || !get_f64s(env, argv[5], SERVED_FIELDS, &served)) {
    free(nv);
    napi_throw_type_error(env, NULL, "startNative(handle, originNs, options, policy, networks, served)");
    return NULL;
  }
  if (!policy_from(env, argv[3], argv[4], &nv->policy)) {
    free(nv);
    napi_throw_type_error(env, NULL, "startNative: bad policy or networks (or out of memory)");
    return NULL;
  }
  nv->origin_ns = origin;
  nv->timestamps = opts[0] != 0;
  nv->correction_ms = opts[1];
  nv->nts_on = opts[2] != 0;
  served_from(served, &nv->served);
  nv->buf = malloc((size_t)ep->batch * ep->slot);
  nv->big = malloc((size_t)ep->batch * ep->slot);
  nv->ring_buf = malloc((size_t)RING * ep->slot);
  nv->nts = nv->nts_on ? calloc(1, sizeof *nv->nts) : NULL;
  if (!nv->buf || !nv->big || !nv->ring_buf || (nv->nts_on && !nv->nts)) {
    free(nv->buf);
    free(nv->big);
    free(nv->nts);
    free(nv->ring_buf);
    policy_free(&nv->policy);
    free(nv);
    napi_throw_error(env, NULL, "startNative: out of memory");
    return NULL;
  }
  for (int i = 0; i < ep->batch; i++) {
    nv->iov[i].iov_base = nv->buf + (size_t)i * ep->slot;
    nv->iov[i].iov_len = (size_t)ep->slot;
  }
  pthread_mutex_init(&nv->lock, NULL);
  pthread_mutex_init(&nv->keys_lock, NULL);
  pthread_mutex_init(&nv->log_lock, NULL);
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  uv_async_init(loop, &ep->async_wake, on_wake);
  ep->async_wake.data = ep;
  /* From here the thread reads the socket, blocking; libuv no longer watches it. */
  uv_poll_stop(&ep->poll);
  /* Only a safety net (native_stop wakes the thread with shutdown): every expiry wakes an idle thread, which
   * on a loaded 2-core VM cost some 0.5 ms of CPU each (docs/performance.md "The floor"); at 5 s the two
   * threads of a dual-stack server took 0.12 ms/s of an idle service (docs/performance.md "At rest"), so
   * it is a minute. */
  struct timeval wait = {60, 0};
  setsockopt(ep->fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  int fl = fcntl(ep->fd, F_GETFL);
  if (fl >= 0) fcntl(ep->fd, F_SETFL, fl & ~O_NONBLOCK); /* sends from JavaScript pass MSG_DONTWAIT */
  ep->native = nv;
  if (pthread_create(&nv->thread, NULL, native_main, ep) != 0) {
    ep->native = NULL;
    if (fl >= 0) fcntl(ep->fd, F_SETFL, fl);
    uv_poll_start(&ep->poll, UV_READABLE, on_poll);
    uv_close((uv_handle_t *)&ep->async_wake, NULL);
    native_free(nv);
    napi_throw_error(env, NULL, "startNative: pthread_create failed");
    return NULL;
  }
  nv->started = 1;
  return NULL;
}

/* setServed(handle, served f64[SERVED_FIELDS]): a new piece of the served clock and new reply fields. */
static napi_value SetServed(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  endpoint_t *ep = argc >= 2 ? endpoint_of(env, argv[0]) : NULL;
  if (!ep) return NULL;
  double *a;
  if (!ep->native || !get_f64s(env, argv[1], SERVED_FIELDS, &a)) {
    napi_throw_type_error(env, NULL, "setServed(native handle, f64[16])");
    return NULL;
  }
  nf_served_t s;
  served_from(a, &s);
  pthread_mutex_lock(&ep->native->lock);
  ep->native->served = s;
  pthread_mutex_unlock(&ep->native->lock);
  return NULL;
}

/*
 * setNtsKeys(handle, current, ids f64[n], keys u8[32n]): the NTS cookie master keys (docs/nts.md
 * "Cookies"): `current` seals new cookies, each id opens its own. Returns false when out of memory (the
 * old keys stay).
 */
static napi_value SetNtsKeys(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  endpoint_t *ep = argc >= 4 ? endpoint_of(env, argv[0]) : NULL;
  if (!ep) return NULL;
  double current = 0, *ids;
  uint8_t *keys;
  napi_typedarray_type type;
  size_t nids = 0, nkeys = 0, off;
  napi_value ab, result;
  if (!ep->native || !ep->native->nts || napi_get_value_double(env, argv[1], &current) != napi_ok ||
      napi_get_typedarray_info(env, argv[2], &type, &nids, (void **)&ids, &ab, &off) != napi_ok ||
      type != napi_float64_array || nids > NN_MAX_KEYS ||
      napi_get_typedarray_info(env, argv[3], &type, &nkeys, (void **)&keys, &ab, &off) != napi_ok ||
      type != napi_uint8_array || nkeys != 32 * nids) {
    napi_throw_type_error(env, NULL, "setNtsKeys(native NTS handle, current, ids, keys)");
    return NULL;
  }
  uint32_t u[NN_MAX_KEYS];
  for (size_t i = 0; i < nids; i++) u[i] = (uint32_t)ids[i];
  native_t *nv = ep->native;
  pthread_mutex_lock(&nv->keys_lock);
  int ok = nn_set_keys(nv->nts, (uint32_t)current, u, keys, (int)nids);
  pthread_mutex_unlock(&nv->keys_lock);
  napi_get_boolean(env, ok, &result);
  return result;
}

/* ntsActive(handle, cutoffMs) -> NTS sessions seen authentic on the native thread at or after perf cutoffMs. */
static napi_value NtsActive(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  endpoint_t *ep = argc >= 2 ? endpoint_of(env, argv[0]) : NULL;
  if (!ep) return NULL;
  double cutoff = 0;
  napi_get_value_double(env, argv[1], &cutoff);
  napi_value result;
  napi_create_int32(env, ep->native && ep->native->nts ? nn_active(ep->native->nts, cutoff) : 0, &result);
  return result;
}

/* stats(handle, f64[ST_COUNT]): the native thread's counters (monotonic totals). */
static napi_value Stats(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  endpoint_t *ep = argc >= 2 ? endpoint_of(env, argv[0]) : NULL;
  if (!ep) return NULL;
  double *a;
  if (!get_f64s(env, argv[1], ST_COUNT, &a)) {
    napi_throw_type_error(env, NULL, "stats(handle, f64[ST_COUNT])");
    return NULL;
  }
  for (int i = 0; i < ST_COUNT; i++)
    a[i] = ep->native ? (double)__atomic_load_n(&ep->native->stats[i], __ATOMIC_RELAXED) : 0;
  return NULL;
}

/* Most clients one clients() call returns (the API's bound, docs/cli.md "clients"). */
#define MAX_CLIENTS_REPORTED 1000

/* Copy `n` snapshot entries into keys u8[17n] and nums f64[7n] (hits, drops, kod_rate, kod_deny, last_ts,
 * rate, timeout_rate: client-log.ts ClientLogEntry). */
static void clients_out(const nf_client_t *c, int n, uint8_t *keys, double *nums) {
  for (int i = 0; i < n; i++) {
    memcpy(keys + (size_t)i * 17, c[i].key, 17);
    double *o = nums + (size_t)i * 7;
    o[0] = c[i].hits;
    o[1] = c[i].drops;
    o[2] = c[i].kod_rate;
    o[3] = c[i].kod_deny;
    o[4] = c[i].last_ts;
    o[5] = c[i].rate;
    o[6] = c[i].timeout_rate;
  }
}

/*
 * clients(handle, max, keys u8[17 max], nums f64[7 max]) -> count: the native thread's client log, most
 * recently seen first, at most max (<= MAX_CLIENTS_REPORTED). Copied under log_lock, which the thread holds
 * around each decision, so the table is never read while it changes.
 */
static napi_value Clients(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  endpoint_t *ep = argc >= 4 ? endpoint_of(env, argv[0]) : NULL;
  if (!ep) return NULL;
  int32_t max = 0;
  uint8_t *keys;
  double *nums;
  if (napi_get_value_int32(env, argv[1], &max) != napi_ok || max < 0 || max > MAX_CLIENTS_REPORTED ||
      !typed(env, argv[2], napi_uint8_array, (size_t)max * 17, (void **)&keys) ||
      !get_f64s(env, argv[3], (size_t)max * 7, &nums)) {
    napi_throw_type_error(env, NULL, "clients(handle, max <= 1000, u8[17 max], f64[7 max])");
    return NULL;
  }
  int n = 0;
  native_t *nv = ep->native;
  if (nv && max > 0) {
    nf_client_t *c = malloc(sizeof(nf_client_t) * (size_t)max);
    if (c) {
      pthread_mutex_lock(&nv->log_lock);
      n = nf_limiter_snapshot(&nv->policy.limiter, c, max);
      pthread_mutex_unlock(&nv->log_lock);
      clients_out(c, n, keys, nums);
      free(c);
    }
  }
  napi_value result;
  napi_create_int32(env, n, &result);
  return result;
}

static void native_stop(endpoint_t *ep) {
  native_t *nv = ep->native;
  if (!nv || !nv->started) return;
  __atomic_store_n(&nv->stop, 1, __ATOMIC_RELEASE);
  shutdown(ep->fd, SHUT_RD); /* ends the thread's blocked receive (UDP: recvmmsg returns 0) */
  pthread_join(nv->thread, NULL);
  nv->started = 0;
}

static void native_free(native_t *nv) {
  free(nv->buf);
  free(nv->big);
  free(nv->ring_buf);
  if (nv->nts) {
    nn_free(nv->nts);
    free(nv->nts);
  }
  policy_free(&nv->policy);
  pthread_mutex_destroy(&nv->lock);
  pthread_mutex_destroy(&nv->keys_lock);
  pthread_mutex_destroy(&nv->log_lock);
  free(nv);
}

/* ---- Test entry points: the C responder on inputs from test/ntp-native-responder.test.ts ---- */

/* testLimiter(policy f64[6], records u8[24n], times f64[n]) -> u8[n] decisions (0 allow, 1 kod, 2 drop). */
static napi_value TestLimiter(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  double *a, *times;
  uint8_t *recs;
  napi_typedarray_type type;
  size_t rlen = 0, tlen = 0, off;
  napi_value ab, empty, result;
  nf_policy_t p;
  napi_value empty_buffer;
  void *unused;
  napi_create_arraybuffer(env, 0, &unused, &empty_buffer);
  napi_create_typedarray(env, napi_uint8_array, 0, empty_buffer, 0, &empty);
  if (argc < 3 || !get_f64s(env, argv[0], POLICY_FIELDS, &a) ||
      napi_get_typedarray_info(env, argv[1], &type, &rlen, (void **)&recs, &ab, &off) != napi_ok ||
      napi_get_typedarray_info(env, argv[2], &type, &tlen, (void **)&times, &ab, &off) != napi_ok ||
      rlen != tlen * ADDR_BYTES || !policy_from(env, argv[0], empty, &p)) {
    napi_throw_type_error(env, NULL, "testLimiter(policy, records, times)");
    return NULL;
  }
  uint8_t *out;
  napi_value buf;
  napi_create_arraybuffer(env, tlen, (void **)&out, &buf);
  for (size_t i = 0; i < tlen; i++) out[i] = (uint8_t)nf_limiter_check(&p.limiter, recs + i * ADDR_BYTES, times[i], 0);
  policy_free(&p);
  napi_create_typedarray(env, napi_uint8_array, tlen, buf, 0, &result);
  return result;
}

/*
 * testClients(policy f64[6], records u8[24n], times f64[n], denied u8[n], decisions u8[n], max, keys
 * u8[17 max], nums f64[7 max]) -> count: the requests through nf_limiter_check, then the client log as
 * clients() returns it.
 */
static napi_value TestClients(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  double *a, *times, *nums;
  uint8_t *recs, *denied, *decisions, *keys;
  napi_typedarray_type type;
  size_t rlen = 0, tlen = 0, off;
  int32_t max = 0;
  napi_value ab, empty, empty_buffer;
  void *unused;
  nf_policy_t p;
  napi_create_arraybuffer(env, 0, &unused, &empty_buffer);
  napi_create_typedarray(env, napi_uint8_array, 0, empty_buffer, 0, &empty);
  if (argc < 8 || !get_f64s(env, argv[0], POLICY_FIELDS, &a) ||
      napi_get_typedarray_info(env, argv[1], &type, &rlen, (void **)&recs, &ab, &off) != napi_ok ||
      napi_get_typedarray_info(env, argv[2], &type, &tlen, (void **)&times, &ab, &off) != napi_ok ||
      type != napi_float64_array || rlen != tlen * ADDR_BYTES ||
      !typed(env, argv[3], napi_uint8_array, tlen, (void **)&denied) ||
      !typed(env, argv[4], napi_uint8_array, tlen, (void **)&decisions) ||
      napi_get_value_int32(env, argv[5], &max) != napi_ok || max < 0 || max > MAX_CLIENTS_REPORTED ||
      !typed(env, argv[6], napi_uint8_array, (size_t)max * 17, (void **)&keys) ||
      !get_f64s(env, argv[7], (size_t)max * 7, &nums) || !policy_from(env, argv[0], empty, &p)) {
    napi_throw_type_error(env, NULL, "testClients(policy, records, times, denied, decisions, max, keys, nums)");
    return NULL;
  }
  for (size_t i = 0; i < tlen; i++)
    decisions[i] = (uint8_t)nf_limiter_check(&p.limiter, recs + i * ADDR_BYTES, times[i], denied[i] != 0);
  int n = 0;
  nf_client_t *c = max > 0 ? malloc(sizeof(nf_client_t) * (size_t)max) : NULL;
  if (c) {
    n = nf_limiter_snapshot(&p.limiter, c, max);
    clients_out(c, n, keys, nums);
    free(c);
  }
  policy_free(&p);
  napi_value result;
  napi_create_int32(env, n, &result);
  return result;
}

/* testAccess(networks u8[18k], records u8[24n]) -> u8[n] (1 allowed). */
static napi_value TestAccess(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  nf_policy_t p;
  memset(&p, 0, sizeof p);
  uint8_t *recs;
  napi_typedarray_type type;
  size_t rlen = 0, off;
  napi_value ab, result;
  if (argc < 2 || !networks_from(env, argv[0], &p) ||
      napi_get_typedarray_info(env, argv[1], &type, &rlen, (void **)&recs, &ab, &off) != napi_ok) {
    napi_throw_type_error(env, NULL, "testAccess(networks, records)");
    return NULL;
  }
  size_t n = rlen / ADDR_BYTES;
  uint8_t *out;
  napi_value buf;
  napi_create_arraybuffer(env, n, (void **)&out, &buf);
  for (size_t i = 0; i < n; i++) out[i] = (uint8_t)nf_access_allows(&p, recs + i * ADDR_BYTES);
  free(p.networks);
  napi_create_typedarray(env, napi_uint8_array, n, buf, 0, &result);
  return result;
}

/*
 * testRespond(served f64[16], request u8, record u8[24], atMs, out u8[48]) -> outcome: nf_decide with no
 * policy, and on a reply the receive timestamp of the piece at atMs in bytes 32-39.
 */
static napi_value TestRespond(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  double *a, at = 0;
  uint8_t *req, *rec, *out;
  napi_typedarray_type type;
  size_t qlen = 0, len2 = 0, olen = 0, off;
  napi_value ab, result;
  if (argc < 5 || !get_f64s(env, argv[0], SERVED_FIELDS, &a) ||
      napi_get_typedarray_info(env, argv[1], &type, &qlen, (void **)&req, &ab, &off) != napi_ok ||
      napi_get_typedarray_info(env, argv[2], &type, &len2, (void **)&rec, &ab, &off) != napi_ok ||
      len2 < ADDR_BYTES || napi_get_value_double(env, argv[3], &at) != napi_ok ||
      napi_get_typedarray_info(env, argv[4], &type, &olen, (void **)&out, &ab, &off) != napi_ok || olen < 48) {
    napi_throw_type_error(env, NULL, "testRespond(served, request, record, atMs, out)");
    return NULL;
  }
  nf_served_t s;
  served_from(a, &s);
  nf_policy_t p;
  memset(&p, 0, sizeof p);
  int code = nf_decide(req, (int)qlen, rec, at, &s, &p, out);
  if (code == NF_REPLY) nf_served_write(&s, at, out + 32);
  napi_create_int32(env, code, &result);
  return result;
}

/* recv(handle) -> take_batch(): another batch within the same readiness callback. */
static napi_value Recv(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  endpoint_t *ep = argc >= 1 ? endpoint_of(env, argv[0]) : NULL;
  if (!ep) return NULL;
  napi_value result;
  napi_create_int32(env, take_batch(ep), &result);
  return result;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * send(handle, count, servedSeconds, servedFraction) -> datagrams not sent (send errors). Reply i is
 * txBuf[i*slot .. +txLen[i]] to the source of received datagram txFrom[i] of the current batch; when
 * txFlags[i] & 1, bytes 40-47 get the transmit timestamp: (servedSeconds, servedFraction) is the served
 * NTP time read by the caller just before the call, carried forward by CLOCK_MONOTONIC per chunk.
 */
static napi_value Send(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  endpoint_t *ep = argc >= 4 ? endpoint_of(env, argv[0]) : NULL;
  if (!ep) return NULL;
  double t0 = mono_s();
  int32_t count = 0;
  double sec = 0, frac = 0;
  if (!get_i32(env, argv[1], &count) || count < 0 || count > ep->batch ||
      napi_get_value_double(env, argv[2], &sec) != napi_ok ||
      napi_get_value_double(env, argv[3], &frac) != napi_ok) {
    napi_throw_type_error(env, NULL, "send(handle, count, seconds, fraction)");
    return NULL;
  }
  int failed = 0;
  int n = 0;
  for (int i = 0; i < count; i++) {
    int from = ep->tx_from[i];
    int32_t len = ep->tx_len[i];
    if (from < 0 || from >= ep->batch || len < 0 || len > ep->slot) {
      failed++;
      continue;
    }
    struct msghdr *h = &ep->tx_msgs[n].msg_hdr;
    memset(h, 0, sizeof *h);
    h->msg_name = &ep->names[from];
    h->msg_namelen = ep->names[from].sin6_family == AF_INET ? sizeof(struct sockaddr_in)
                                                            : sizeof(struct sockaddr_in6);
    ep->tx_iov[n].iov_base = ep->tx_buf + (size_t)i * ep->slot;
    ep->tx_iov[n].iov_len = (size_t)len;
    h->msg_iov = &ep->tx_iov[n];
    h->msg_iovlen = 1;
    ep->tx_msgs[n].msg_len = (len >= 48 && (ep->tx_flags[i] & 1)) ? 1 : 0; /* reused as "stamp me" */
    n++;
  }
  int at = 0;
  while (at < n) {
    int chunk = n - at < TX_CHUNK ? n - at : TX_CHUNK;
    /* T3 for this chunk: the caller's served time + monotonic time since the call began. */
    double elapsed = mono_s() - t0;
    double f = frac + elapsed * 4294967296.0;
    double s = sec + (double)(uint64_t)(f / 4294967296.0);
    f -= (double)(uint64_t)(f / 4294967296.0) * 4294967296.0;
    uint32_t ws = (uint32_t)(uint64_t)s, wf = (uint32_t)f;
    uint32_t bs = htonl(ws), bf = htonl(wf);
    for (int k = at; k < at + chunk; k++) {
      if (ep->tx_msgs[k].msg_len == 1) {
        uint8_t *p = (uint8_t *)ep->tx_iov[k].iov_base;
        memcpy(p + 40, &bs, 4);
        memcpy(p + 44, &bf, 4);
      }
    }
    int r;
    do {
      r = sendmmsg(ep->fd, ep->tx_msgs + at, (unsigned)chunk, MSG_DONTWAIT);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
        /* Send buffer full: the rest of the batch is dropped, as a server short of buffer must. */
        failed += n - at;
        break;
      }
      failed++; /* this datagram failed (e.g. no route); carry on with the next */
      at++;
      continue;
    }
    at += r;
  }
  napi_value result;
  napi_create_int32(env, failed, &result);
  return result;
}

/* close(handle): stop watching and close the socket (after libuv has let go of it). */
static napi_value Close(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  endpoint_t *ep = argc >= 1 ? endpoint_of(env, argv[0]) : NULL;
  if (!ep) return NULL;
  ep->closing = 1;
  uv_poll_stop(&ep->poll);
  if (ep->native) {
    native_stop(ep);
    ep->open_handles = 2;
    uv_close((uv_handle_t *)&ep->async_wake, on_closed);
  } else {
    ep->open_handles = 1;
  }
  for (int i = 0; i < 8; i++) napi_delete_reference(env, ep->refs[i]);
  napi_delete_reference(env, ep->on_readable);
  napi_async_destroy(env, ep->async);
  uv_close((uv_handle_t *)&ep->poll, on_closed);
  return NULL;
}

static napi_value names_array(napi_env env, const char *const *names, int count) {
  napi_value arr, name;
  napi_create_array_with_length(env, (size_t)count, &arr);
  for (int i = 0; i < count; i++) {
    napi_create_string_utf8(env, names[i], NAPI_AUTO_LENGTH, &name);
    napi_set_element(env, arr, (uint32_t)i, name);
  }
  return arr;
}

/*
 * layout() -> {served, policy, stats: names in array order; outcomes: {OUTCOME key: code}}: what this build
 * expects of the arrays JavaScript hands it (SERVED_LAYOUT, POLICY_LAYOUT, STATS_LAYOUT, NF_OUTCOMES).
 */
static napi_value Layout(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result, outcomes, code;
  napi_create_object(env, &result);
  napi_set_named_property(env, result, "served", names_array(env, SERVED_NAMES, SERVED_FIELDS));
  napi_set_named_property(env, result, "policy", names_array(env, POLICY_NAMES, POLICY_FIELDS));
  napi_set_named_property(env, result, "stats", names_array(env, STATS_NAMES, ST_COUNT));
  napi_create_object(env, &outcomes);
#define OUTCOME_PROPERTY(id, key, value)                                                                    \
  napi_create_int32(env, value, &code);                                                                   \
  napi_set_named_property(env, outcomes, key, code);
  NF_OUTCOMES(OUTCOME_PROPERTY)
#undef OUTCOME_PROPERTY
  napi_set_named_property(env, result, "outcomes", outcomes);
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"bind", NULL, Bind, NULL, NULL, NULL, napi_default, NULL},
      {"localPort", NULL, LocalPort, NULL, NULL, NULL, napi_default, NULL},
      {"closeFd", NULL, CloseFd, NULL, NULL, NULL, napi_default, NULL},
      {"attach", NULL, Attach, NULL, NULL, NULL, napi_default, NULL},
      {"recv", NULL, Recv, NULL, NULL, NULL, napi_default, NULL},
      {"send", NULL, Send, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, Close, NULL, NULL, NULL, napi_default, NULL},
      {"startNative", NULL, StartNative, NULL, NULL, NULL, napi_default, NULL},
      {"setServed", NULL, SetServed, NULL, NULL, NULL, napi_default, NULL},
      {"stats", NULL, Stats, NULL, NULL, NULL, napi_default, NULL},
      {"setNtsKeys", NULL, SetNtsKeys, NULL, NULL, NULL, napi_default, NULL},
      {"ntsActive", NULL, NtsActive, NULL, NULL, NULL, napi_default, NULL},
      {"testLimiter", NULL, TestLimiter, NULL, NULL, NULL, napi_default, NULL},
      {"testClients", NULL, TestClients, NULL, NULL, NULL, napi_default, NULL},
      {"clients", NULL, Clients, NULL, NULL, NULL, napi_default, NULL},
      {"testAccess", NULL, TestAccess, NULL, NULL, NULL, napi_default, NULL},
      {"testRespond", NULL, TestRespond, NULL, NULL, NULL, napi_default, NULL},
      {"layout", NULL, Layout, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
