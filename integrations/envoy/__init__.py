"""Headroom admission for Envoy: the external processor (ext_proc.py) and its Envoy configuration (envoy.yaml)."""
