"""Pure capacity math: units, deliverable supply, failure policies, sizing, cost.

No Django, no I/O. Everything here is a function over numbers so the web, the
admission path and the planners all read one definition of a capacity unit.
"""
