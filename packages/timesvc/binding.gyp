{
  "targets": [
    {
      "target_name": "rx_timestamp",
      "conditions": [["OS=='linux'", { "sources": ["native/rx-timestamp.c"] }]]
    },
    {
      "target_name": "tx_timestamp",
      "conditions": [["OS=='linux'", { "sources": ["native/tx-timestamp.c"] }]]
    }
  ]
}
