/*
 * DiffServ marking for Node's UDP sockets: setsockopt(IP_TOS) (ip(7)), which node:dgram does not offer.
 * The DSCP is the upper six bits of the former TOS byte (RFC 2474 §3), so TOS = DSCP << 2; the ECN bits
 * (RFC 3168) stay 0. Used for PTP event and general messages (docs/ptp.md "Profiles": AES67 asks for EF
 * and AF41).
 */
#include <netinet/in.h>
#include <netinet/ip.h>
#include <node_api.h>
#include <sys/socket.h>

static napi_value SetDscp(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_value result;
  int32_t fd = -1;
  int32_t dscp = -1;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 2 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0 ||
      napi_get_value_int32(env, argv[1], &dscp) != napi_ok || dscp < 0 || dscp > 63) {
    napi_throw_type_error(env, NULL, "setDscp(fd >= 0, dscp 0..63)");
    return NULL;
  }
  int tos = dscp << 2;
  int ok = setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos) == 0;
  napi_get_boolean(env, ok, &result);
  return result;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "setDscp", NAPI_AUTO_LENGTH, SetDscp, NULL, &fn);
  napi_set_named_property(env, exports, "setDscp", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
