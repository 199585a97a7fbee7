"""The HTTP gateway: the edge where provider output enters modelevents (webhooks, runs it starts, forwarded frames)."""
