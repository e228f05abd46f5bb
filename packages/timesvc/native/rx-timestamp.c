/*
 * Kernel receive timestamps for Node's UDP sockets.
 *
 * Node (libuv) reads datagrams with recvmsg() and drops the control messages, so SO_TIMESTAMPNS is out of
 * reach; but socket(7) SIOCGSTAMPNS returns the kernel's receive timestamp of the last packet passed to the
 * user on that socket. libuv calls the receive callback right after each recvmsg() (no recvmmsg batching
 * unless asked), so inside Node's 'message' handler this is the timestamp of that very datagram. The first
 * call enables timestamping on the socket (it answers ENOENT until a stamped packet has arrived).
 *
 * Used for the NTP receive timestamp (RFC 5905 §8 T2 / T4): without it the timestamp is taken when the event
 * loop gets round to the datagram, 0.1 to 0.25 ms late on a VM, and the client's offset is off by half that.
 */
#include <node_api.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <time.h>

static napi_value LastRxTimestampMs(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_value result;
  int32_t fd = -1;
  struct timespec ts;

  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, NULL, "fd must be a non-negative integer");
    return NULL;
  }
  if (ioctl(fd, SIOCGSTAMPNS, &ts) != 0) {
    napi_get_undefined(env, &result);
    return result;
  }
  /* Unix epoch milliseconds as a double: 2^53 ns-resolution headroom is not needed, ~0.2 µs is plenty. */
  napi_create_double(env, (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6, &result);
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "lastRxTimestampMs", NAPI_AUTO_LENGTH, LastRxTimestampMs, NULL, &fn);
  napi_set_named_property(env, exports, "lastRxTimestampMs", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
