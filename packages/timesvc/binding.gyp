{
  "targets": [
    {
      "target_name": "rx_timestamp",
      "conditions": [["OS=='linux'", { "sources": ["native/rx-timestamp.c"] }]]
    }
  ]
}
