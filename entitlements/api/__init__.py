"""The foundation REST API: catalogue, pools, entitlements and the gateway snapshot (CONTRACT §7)."""
