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
 */
#define _GNU_SOURCE /* recvmmsg, sendmmsg */
#include <errno.h>
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

#define MAX_BATCH 256
#define ADDR_BYTES 24
/* Replies per sendmmsg() between two readings of the clock (bounds the T3 error, docs/performance.md). */
#define TX_CHUNK 8
#define CTRL_BYTES 64

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

static void on_poll(uv_poll_t *handle, int status, int events) {
  endpoint_t *ep = (endpoint_t *)handle->data;
  (void)events;
  (void)status; /* an error is seen by the next recv() */
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
}

static void on_closed(uv_handle_t *handle) {
  endpoint_t *ep = (endpoint_t *)handle->data;
  close(ep->fd);
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
static int take_batch(endpoint_t *ep) {
  for (int i = 0; i < ep->batch; i++) {
    struct msghdr *h = &ep->rx_msgs[i].msg_hdr;
    h->msg_name = &ep->names[i];
    h->msg_namelen = sizeof ep->names[i];
    h->msg_iov = &ep->rx_iov[i];
    h->msg_iovlen = 1;
    h->msg_control = ep->ctrl[i];
    h->msg_controllen = CTRL_BYTES;
    h->msg_flags = 0;
  }
  int n;
  do {
    n = recvmmsg(ep->fd, ep->rx_msgs, (unsigned)ep->batch, MSG_DONTWAIT, NULL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  for (int i = 0; i < n; i++) {
    struct msghdr *h = &ep->rx_msgs[i].msg_hdr;
    ep->rx_len[i] = (h->msg_flags & MSG_TRUNC) ? -1 : (int32_t)ep->rx_msgs[i].msg_len;
    uint8_t *a = ep->rx_addr + (size_t)i * ADDR_BYTES;
    memset(a, 0, ADDR_BYTES);
    if (ep->names[i].sin6_family == AF_INET) {
      struct sockaddr_in *s = (struct sockaddr_in *)&ep->names[i];
      a[0] = 4;
      memcpy(a + 2, &s->sin_port, 2);
      memcpy(a + 4, &s->sin_addr, 4);
    } else {
      a[0] = 6;
      memcpy(a + 2, &ep->names[i].sin6_port, 2);
      memcpy(a + 4, &ep->names[i].sin6_addr, 16);
      uint32_t scope = ep->names[i].sin6_scope_id;
      memcpy(a + 20, &scope, 4);
    }
    double stamp = 0.0 / 0.0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c != NULL; c = CMSG_NXTHDR(h, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        struct timespec ts;
        memcpy(&ts, CMSG_DATA(c), sizeof ts);
        stamp = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
      }
    }
    ep->rx_stamp[i] = stamp;
  }
  return n;
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
  for (int i = 0; i < 8; i++) napi_delete_reference(env, ep->refs[i]);
  napi_delete_reference(env, ep->on_readable);
  napi_async_destroy(env, ep->async);
  uv_close((uv_handle_t *)&ep->poll, on_closed);
  return NULL;
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
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
