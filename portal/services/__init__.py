"""Writes of the web layer: launch intake workflow and its notifications."""
