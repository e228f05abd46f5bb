{
  "targets": [
    {
      "target_name": "rx_timestamp",
      "conditions": [["OS=='linux'", { "sources": ["native/rx-timestamp.c"] }]]
    },
    {
      "target_name": "ntp_mmsg",
      "conditions": [["OS=='linux'", { "sources": ["native/mmsg.c"] }]]
    }
  ]
}
