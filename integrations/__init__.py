"""Headroom inside gateways people already run (issue 37; docs/gateways.md): LiteLLM (litellm/),
Envoy (envoy/), and what they share (headroom_admission.py)."""
