"""The foundation REST API: catalogue, pools, entitlements and the gateway snapshot (docs/contract.md §7)."""
