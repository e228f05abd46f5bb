/*
 * Kernel transmit timestamps for Node's UDP sockets (the upstream client's T1, RFC 5905 §8).
 *
 * A timestamp read in JavaScript before send() is early by the time the datagram takes through Node, libuv
 * and the socket layer (tens of µs, more under load), and the client's offset is off by half that. With
 * SO_TIMESTAMPING and SOF_TIMESTAMPING_TX_SOFTWARE (the Linux socket timestamping interface, socket(7)) the
 * kernel stamps the datagram when the device takes it and queues the stamp on the socket's
 * error queue; OPT_TSONLY queues the stamp without a copy of the datagram. chronyd uses the same mechanism
 * for its client requests.
 *
 * A queued stamp makes the socket report POLLERR to libuv until it is read, so the caller reads it right
 * after send() (on loopback and most devices the stamp is queued before sendmsg() returns) and again when
 * the reply arrives.
 *
 * Receive timestamps (rx-timestamp.c, SIOCGSTAMPNS) keep working: SOF_TIMESTAMPING_SOFTWARE is not set, so
 * ordinary receives still record the socket's last receive timestamp; the error-queue message carries the
 * stamp in its SO_TIMESTAMPING control message only when the reporting flag is set, which is why the
 * stamp is taken here from the SCM_TIMESTAMPING message when present and otherwise from SIOCGSTAMPNS right
 * after the error-queue read (the kernel records an error-queue skb's stamp there as for any receive).
 */
#include <errno.h>
#include <netinet/in.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <linux/sockios.h>
#include <node_api.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#ifndef SO_TIMESTAMPING
#define SO_TIMESTAMPING 37
#endif
#ifndef SCM_TIMESTAMPING
#define SCM_TIMESTAMPING SO_TIMESTAMPING
#endif

static int get_fd(napi_env env, napi_callback_info info, int32_t *fd) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], fd) != napi_ok || *fd < 0) {
    napi_throw_type_error(env, NULL, "fd must be a non-negative integer");
    return 0;
  }
  return 1;
}

/* enableTxTimestamps(fd): true when the kernel accepted SO_TIMESTAMPING for transmit stamps. */
static napi_value EnableTxTimestamps(napi_env env, napi_callback_info info) {
  int32_t fd = -1;
  napi_value result;
  if (!get_fd(env, info, &fd)) return NULL;
  unsigned int flags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_OPT_TSONLY;
  int ok = setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof flags) == 0;
  napi_get_boolean(env, ok, &result);
  return result;
}

/*
 * readTxTimestampMs(fd): drains the socket's error queue; the newest transmit stamp as Unix epoch ms (a
 * double), or undefined when none was queued.
 */
static napi_value ReadTxTimestampMs(napi_env env, napi_callback_info info) {
  int32_t fd = -1;
  napi_value result;
  double newest = -1;
  if (!get_fd(env, info, &fd)) return NULL;
  for (int i = 0; i < 64; i++) {
    char data[64];
    char control[512];
    struct iovec iov = {.iov_base = data, .iov_len = sizeof data};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) break;
    double stamp = -1;
    int is_tx = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
        struct timespec ts[3];
        memcpy(ts, CMSG_DATA(c), sizeof ts);
        if (ts[0].tv_sec != 0 || ts[0].tv_nsec != 0) stamp = (double)ts[0].tv_sec * 1e3 + (double)ts[0].tv_nsec / 1e6;
      } else if ((c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_RECVERR) ||
                 (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_RECVERR)) {
        struct sock_extended_err err;
        memcpy(&err, CMSG_DATA(c), sizeof err);
        if (err.ee_origin == SO_EE_ORIGIN_TIMESTAMPING) is_tx = 1;
      }
    }
    if (stamp < 0 && is_tx) {
      struct timespec ts;
      if (ioctl(fd, SIOCGSTAMPNS, &ts) == 0) stamp = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
    }
    if (stamp >= 0 && is_tx) newest = stamp;
  }
  if (newest < 0) {
    napi_get_undefined(env, &result);
    return result;
  }
  napi_create_double(env, newest, &result);
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "enableTxTimestamps", NAPI_AUTO_LENGTH, EnableTxTimestamps, NULL, &fn);
  napi_set_named_property(env, exports, "enableTxTimestamps", fn);
  napi_create_function(env, "readTxTimestampMs", NAPI_AUTO_LENGTH, ReadTxTimestampMs, NULL, &fn);
  napi_set_named_property(env, exports, "readTxTimestampMs", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
