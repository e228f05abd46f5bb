{
  "targets": [
    {
      "target_name": "rx_timestamp",
      "conditions": [["OS=='linux'", { "sources": ["native/rx-timestamp.c"] }]]
    },
    {
      "target_name": "socket_tos",
      "conditions": [["OS=='linux'", { "sources": ["native/socket-tos.c"] }]]
    },
    {
      "target_name": "tx_timestamp",
      "conditions": [["OS=='linux'", { "sources": ["native/tx-timestamp.c"] }]]
    },
    {
      "target_name": "ntp_mmsg",
      "conditions": [["OS=='linux'", { "sources": ["native/mmsg.c", "native/ntp-fast.c", "native/ntp-nts.c", "native/nts-crypto.c"], "libraries": ["-lpthread", "-lm"] }]]
    },
    {
      "target_name": "nts_cookie",
      "conditions": [["OS=='linux'", { "sources": ["native/nts-cookie.c", "native/nts-crypto.c"] }]]
    }
  ]
}
