"""Claimed runs: the state, claim and heartbeat every long-running job row shares (issue 34.3).

A low layer of its own (under entitlements, over capacity): Django, nothing of ours. forecasting's
ForecastRun and reconciliation's ReconciliationRun subclass `runs.models.ClaimedRun`; `runs.claims`
is the one claim helper both call. Not an installed app: it holds an abstract model only, so it has
no tables and no migrations; each subclass's fields are migrated by its own app.
"""
