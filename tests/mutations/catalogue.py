"""Hand-made mutations: each takes one protection out (or weakens it) in one place.

`old` must occur exactly once in `path` at HEAD; `tests` are the pytest node ids that must fail
with `new` in its place. docs/testing.md lists the same protections with the tests that pin them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    id: str
    protection: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    support: tuple[str, ...] = ()  # helper files the tests import, copied from the checkout too
    also: tuple[tuple[str, str], ...] = ()  # more (old, new) edits in the same file, applied with it
    # Why no test can fail without this line alone (another layer does the same); its survival is then
    # reported as such and does not fail the run. Say what would make it matter.
    equivalent: str = ""


ADM = "tests/admission/"
REPLAY = (ADM + "test_pinned_replays.py",)
CONN = (ADM + "test_pinned_redis_timeouts.py",)
PERIOD = (ADM + "test_pinned_budget_clock.py",)
PLAN = (
    "tests/capacity/test_planning.py",
    "tests/capacity/test_history_workload.py",
    "tests/capacity/test_pinned_replay.py",
)
LAT = ("tests/capacity/test_latency_curve.py", "tests/capacity/test_pinned_latency.py")
FC = "tests/forecasting/"

MUTATIONS: tuple[Mutation, ...] = (
    # ---- the nine gaps of issue 38 ---------------------------------------------------------------
    Mutation(
        "M1",
        "in-process backend: a replay of an expired reservation answers settled",
        "admission/backends/memory.py",
        'settled=r is not None and r.state != "open")',
        'settled=r is not None and r.state == "done")',
        (REPLAY[0] + "::test_a_replay_of_an_expired_reservation_answers_settled_and_is_not_served_again[memory]",),
    ),
    Mutation(
        "M2",
        "reserve.lua: a replay of an expired reservation answers settled",
        "admission/backends/lua/reserve.lua",
        "if head == 'done\\t' or head == 'expir' then",
        "if head == 'done\\t' then",
        (REPLAY[0] + "::test_a_replay_of_an_expired_reservation_answers_settled_and_is_not_served_again[redis]",),
    ),
    Mutation(
        "M3",
        "Redis: a socket that timed out is never reused (its late answer is not the next call's)",
        "admission/backends/redis_calls.py",
        "conn.disconnect()  # a timed-out socket",
        "pass  # a timed-out socket",
        CONN,
        equivalent="redis-py 8.1's Connection.read_response/send_packed_command disconnect on a timeout or OSError "
        "themselves (disconnect_on_error=True); the backend's own disconnect matters if that default changes (M3b)",
    ),
    Mutation(
        "M3b",
        "Redis: as M3, with redis-py's own disconnect on a read error switched off too",
        "admission/backends/redis_calls.py",
        "conn.disconnect()  # a timed-out socket",
        "pass  # a timed-out socket",
        CONN,
        also=(
            (
                "out = conn.read_response()\n                except NoScriptError:",
                "out = conn.read_response(disconnect_on_error=False)\n                except NoScriptError:",
            ),
        ),
    ),
    Mutation(
        "M4",
        "reserve.lua: Redis' clock picks the period bucket a reserve charges (previous / current / next)",
        "admission/backends/lua/reserve.lua",
        "    if now < p.start then kend = p.start_s\n    elseif now < p.stop then k, kend = p.keys[2], p.stop_s\n"
        "    else k, kend = p.keys[3], p.next_stop end\n",
        "    k = p.keys[2]\n",
        PERIOD,
        support=(ADM + "test_budget_contract.py",),
    ),
    Mutation(
        "M5",
        "webhooks: redirects are not followed (SSRF; a signed body is for the configured URL)",
        "alerts/webhooks.py",
        "urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect, HTTP, HTTPS)",
        "urllib.request.build_opener(urllib.request.ProxyHandler({}), HTTP, HTTPS)",
        ("tests/alerts/test_pinned_redirects.py",),
    ),
    Mutation(
        "M6",
        "settings: refuse to start when dedup retention is shorter than the accepted timestamp window",
        "config/settings.py",
        "if math.ceil(TELEMETRY_TS_MAX_AGE_S / 86400) > TELEMETRY_DEDUP_RETENTION_DAYS:",
        "if False:",
        ("tests/config/test_pinned_dedup_window.py",),
    ),
    Mutation(
        "M7",
        "statement: a request whose settled output exceeded the envelope's max is not the platform's miss",
        "telemetry/envelopes.py",
        " and output <= lim[1]",
        "",
        ("tests/statement/test_pinned_envelope_misses.py",),
    ),
    Mutation(
        "M8",
        "sizing: the busiest minute includes windows starting at each request (the exact sliding max)",
        "capacity/rate_basis.py",
        "peak = max(float(at_request.max()) / WINDOW_S, float(window_rates.max()))",
        "peak = float(window_rates.max())",
        ("tests/capacity/test_pinned_sizing.py::test_the_busiest_minute_starts_at_a_request_not_on_the_grid",),
    ),
    Mutation(
        "M9",
        "sizing: past the closed-form switch the KV p99 is never below the simulation's own p99",
        "capacity/kv_demand.py",
        "p99 = max(sim.kv_tokens_p99, mean_kv + Z99 * sd_kv)",
        "p99 = mean_kv + Z99 * sd_kv",
        ("tests/capacity/test_pinned_sizing.py::test_a_bursty_trace_keeps_its_simulated_kv_p99_past_the_switch",),
    ),
    # ---- the sweep: serving path, budgets, audit, webhooks, ingest, the latency curve ----------------
    Mutation(
        "S1",
        "in-process backend: a complete after its period's boundary settles nothing into that period",
        "admission/backends/memory.py",
        "if end > now:  # a period past its boundary is done",
        "if True:  # a period past its boundary is done",
        (ADM + "test_pinned_budget_settle.py",),
        support=(ADM + "test_budget_contract.py",),
    ),
    Mutation(
        "S2",
        "in-process backend: a throttle's answer is replayed for at most an hour",
        "admission/backends/memory.py",
        "now + max(1, min(3600, ra)))  # as reserve.lua",
        "now + max(1, ra))  # as reserve.lua",
        (ADM + "test_budget_contract.py",),
    ),
    Mutation(
        "S3",
        "reserve.lua: a throttle's record lives at most an hour",
        "admission/backends/lua/reserve.lua",
        "'EX', math.max(1, math.min(3600, tonumber(ra))))",
        "'EX', math.max(1, tonumber(ra)))",
        (ADM + "test_budget_contract.py",),
    ),
    Mutation(
        "S4",
        "in-process backend: settled output is capped at the envelope's max",
        "admission/backends/memory.py",
        "cached, output = op.cached_prompt_tokens, min(op.output_tokens, r.max_out)",
        "cached, output = op.cached_prompt_tokens, op.output_tokens",
        (ADM + "test_backend_contract.py",),
    ),
    Mutation(
        "S5",
        "buckets: debt is bounded at one depth (an oversized overrun cannot lock a scope for good)",
        "admission/backends/base.py",
        "return -depth if level < -depth else depth if level > depth else level",
        "return depth if level > depth else level",
        (ADM + "test_backend_contract.py",),
    ),
    Mutation(
        "S6",
        "in-process backend: a forgotten reservation past its signed expiry stands as expired",
        "admission/backends/memory.py",
        "if 0 < lost.expires <= now:",
        "if False:",
        (ADM + "test_ids_and_replays.py",),
    ),
    Mutation(
        "S7",
        "HTTP API: a throttle that can pass on retry carries Retry-After",
        "admission/api.py",
        '(d.headers if ra is None else {**d.headers, "Retry-After": str(ra)})',
        "d.headers",
        (ADM + "test_api.py", ADM + "test_budget_api.py"),
    ),
    Mutation(
        "S8",
        "webhooks: a tenant's URL resolving to a private address is not called (SSRF)",
        "alerts/webhooks.py",
        "_resolve(ep.url, public_only=ep.tenant_id is not None and not allow_private())",
        "_resolve(ep.url, public_only=False)",
        ("tests/alerts/test_webhooks.py", "tests/alerts/test_ssrf.py"),
    ),
    Mutation(
        "S9",
        "webhook signatures: a timestamp outside the tolerance is refused (replays of old deliveries)",
        "alerts/signing.py",
        "if abs((time.time() if now is None else now) - ts) > tolerance_s:",
        "if False:",
        ("tests/alerts/test_webhooks.py",),
    ),
    Mutation(
        "S10",
        "ingest: an event time further ahead than TELEMETRY_TS_MAX_AHEAD_S is a field error",
        "telemetry/validation.py",
        "(latest is not None and ts > latest)",
        "False",
        ("tests/telemetry/test_pinned_ts_window.py", "tests/telemetry/test_ingest.py"),
    ),
    Mutation(
        "S11",
        "audit (SQLite): the history and role-audit tables refuse DELETE",
        "entitlements/history_triggers.py",
        '    for table in APPEND_ONLY:\n        for op in ("update", "delete"):\n            out.append(f"DROP',
        '    for table in APPEND_ONLY:\n        for op in ("update",):\n            out.append(f"DROP',
        # By node id: a session that collects a `postgres` test runs on a throwaway PostgreSQL
        # (tests/conftest.py), where these SQLite triggers are not the ones refusing.
        (
            "tests/security/test_audit_history.py::test_history_refuses_update_and_delete",
            "tests/security/test_role_escalation.py::test_raw_sql_role_grant_is_audited_and_the_audit_is_append_only",
        ),
    ),
    Mutation(
        "S12",
        "latency curve: the load a replica can take within the SLO never exceeds its saturation",
        "capacity/latency_curve.py",
        "return max(0.0, min(by_tpot, by_ttft, self.x_sat))",
        "return max(0.0, min(by_tpot, by_ttft))",
        ("tests/capacity/test_latency_curve.py",),
        equivalent="by_ttft is x_sat · r / (1 + r) < x_sat, or x_sat itself, or 0: the min already never exceeds "
        "x_sat; the cap matters only if the TTFT branch changes",
    ),
    # ---- the sweep over this round's new features: the planning replay and the latency curve ------
    Mutation(
        "R1",
        "replay (and the in-process backend): a bucket never holds more than its depth",
        "capacity/bucket.py",
        "return min(depth, level + rate * max(0.0, elapsed_s))",
        "return level + rate * max(0.0, elapsed_s)",
        PLAN,
    ),
    Mutation(
        "R2",
        "replay (and the in-process backend): time never runs backwards for a bucket",
        "capacity/bucket.py",
        "return min(depth, level + rate * max(0.0, elapsed_s))",
        "return min(depth, level + rate * elapsed_s)",
        PLAN,
    ),
    Mutation(
        "R3",
        "replay: the bucket is full at the first arrival",
        "capacity/planning.py",
        "level, at = depth, float(t[0])",
        "level, at = 0.0, float(t[0])",
        PLAN,
    ),
    Mutation(
        "R4",
        "replay: a throttled request is not charged",
        "capacity/planning.py",
        "level, at = float(pre[j]), float(tt[j])",
        "level, at = float(pre[j] - cc[j]), float(tt[j])",
        PLAN,
    ),
    Mutation(
        "R5",
        "replay: the throttles allowed are compared exactly as a reader would (29 of 100 at a 0.29 target)",
        "capacity/planning.py",
        "    while allowed + 1 <= n and (allowed + 1) / n <= target_throttled_share:\n        allowed += 1\n",
        "",
        PLAN,
    ),
    Mutation(
        "R6",
        "replay: the answer's check fails when one step less is also within the target",
        "capacity/planning.py",
        "return self.replay.throttled_share <= target and (less.cu <= 0 or less.throttled_share > target)",
        "return self.replay.throttled_share <= target",
        PLAN,
    ),
    Mutation(
        "R7",
        "replay: a target throttled share outside 0.0001-0.5 is refused",
        "capacity/planning.py",
        "if not (low <= target_throttled_share <= high):",
        "if False:",
        PLAN,
    ),
    Mutation(
        "R8",
        "history replay past the bound: every recorded bucket's total is kept (lumps round up, never drop)",
        "capacity/planning_workload.py",
        "count = np.ceil(count / bundle).astype(np.int64)",
        "count = np.floor(count / bundle).astype(np.int64)",
        PLAN,
    ),
    Mutation(
        "L1",
        "latency curve: TPOT p99 is infinite at and past saturation",
        "capacity/latency_curve.py",
        "        if x >= self.x_sat:\n            return math.inf\n        return self.a_s",
        "        return self.a_s",
        LAT,
    ),
    Mutation(
        "L2",
        "latency curve: TTFT p99 is infinite at and past saturation",
        "capacity/latency_curve.py",
        "    def ttft_p99(self, x: float) -> float:\n        if x >= self.x_sat:\n            return math.inf\n",
        "    def ttft_p99(self, x: float) -> float:\n",
        LAT,
    ),
    Mutation(
        "L3",
        "latency curve: the slope asymptote is kept above saturation (TPOT finite below it)",
        "capacity/latency_curve.py",
        "    x_inf = max(x_inf, x_sat * MIN_INF_OVER_SAT)\n    return LatencyCurve(a, x_inf, x_sat, p, w,",
        "    return LatencyCurve(a, x_inf, x_sat, p, w,",
        LAT,
    ),
    Mutation(
        "L4",
        "latency curve: TPOT not rising with load in the data is flat at the worst measured",
        "capacity/latency_curve.py",
        "if alpha <= 0 or slope >= 0:",
        "if alpha <= 0:",
        LAT,
    ),
    Mutation(
        "L5",
        "latency curve: a TTFT fit with a negative floor takes half the least TTFT as its floor",
        "capacity/latency_curve.py",
        "    if p < 0:\n        p = _FLOOR_SHARE",
        "    if False:\n        p = _FLOOR_SHARE",
        LAT,
    ),
    Mutation(
        "L6",
        "latency curve: a pair borrows its shape from the same accelerator first",
        "capacity/latency_curve.py",
        "return same or [s for _, s in shapes.values()]",
        "return [s for _, s in shapes.values()]",
        LAT,
    ),
    Mutation(
        "L7",
        "latency fleet: an SLO under the curve's floor needs no fleet (None), not a division by zero",
        "capacity/latency_fleet.py",
        "        if per_replica <= 0:\n            return None\n",
        "",
        LAT,
    ),
    Mutation(
        "L8",
        "latency fleet: the replicas the SLO needs hold the margin at the float boundary too",
        "capacity/latency_fleet.py",
        "        while self.breaking_rate(slo, n) < margin * rate_rps:  # float rounding at the boundary\n"
        "            n += 1\n",
        "",
        LAT,
    ),
    # ---- issue 32's forecasting protections ---------------------------------------------------------
    Mutation(
        "F1",
        "forecast: every candidate, the naive ones included, goes through the guard",
        "forecasting/pipeline.py",
        "refused[n] = guard.refusal(p, allowed)",
        'refused[n] = "" if n.startswith("naive") else guard.refusal(p, allowed)',
        (FC + "test_lead_time.py::test_a_naive_method_ranked_first_still_goes_through_the_guard",),
        support=(FC + "helpers.py",),
    ),
    Mutation(
        "F2",
        "forecast guard: a week's peak is bounded by the recent weeks' median peak (a burst is not allowed again)",
        "forecasting/guard.py",
        '"peak_high": list(np.median(peaks) * (1 + BAND) + up * ratio),',
        '"peak_high": list(peaks.max() * (1 + BAND) + up * ratio),',
        (FC + "test_lead_time.py::test_guard_refuses_the_repeated_burst",),
        support=(FC + "helpers.py",),
    ),
    Mutation(
        "F3",
        "forecast: a trend carries the band only when a trend model beats every flat one in the backtest",
        "forecasting/pipeline.py",
        'info["significant"] = bool(trended < flat)',
        'info["significant"] = True',
        (FC + "test_lead_time.py::test_a_significant_slope_carries_only_when_a_trend_model_beats_every_flat_one",),
        support=(FC + "helpers.py",),
    ),
    Mutation(
        "F4",
        "forecast: the realised error of earlier runs counts in this run's ranking",
        "forecasting/pipeline.py",
        's = 0.5 * s + 0.5 * fb.realised[r["method"]]',
        "s = s",
        (FC + "test_realised.py::test_feedback_widens_the_bands_and_counts_in_the_ranking",),
        support=(FC + "helpers.py",),
    ),
    Mutation(
        "F5",
        "forecast: the realised P90 coverage widens or narrows the bands",
        "forecasting/pipeline.py",
        # With a backtest the factor scales the calibrated widths (lead_bands' own factor is for a
        # series without one).
        "selection.calibrate_lead(t, fbs[i].widen)",
        "selection.calibrate_lead(t, 1.0)",
        (FC + "test_realised.py::test_feedback_widens_the_bands_and_counts_in_the_ranking",),
        support=(FC + "helpers.py",),
    ),
    Mutation(
        "F6",
        "forecast: an accepted finding's committed change moves the next run's forecast and pool demand",
        "forecasting/chunks.py",
        "pipeline.apply_committed(f, committed.get(f.key, []))",
        "pass",
        (FC + "test_committed.py::test_an_accepted_finding_moves_the_next_forecast_and_its_pools_demand",),
        support=(FC + "helpers.py",),
    ),
    # ---- issue 50: this round's protections (breaker, lending, fair share, spillover, quota headers, OIDC,
    # served_from, surrogates, the trace bound, the webhook guard, the cheapest point, the refused-token cut-off,
    # OIDC lockout per subject, import_atlas --allow-lower, run_all's supervision); docs/testing.md lists them
    # with the same tests ------------------------------------------------------------------------------------
    Mutation(
        "H1",
        "breaker: five failures open it only when the store then fails a PING too (an answered PING resets them)",
        "admission/backends/breaker.py",
        "            if self._probe():",
        "            if False:",
        (ADM + "test_breaker.py::test_five_failures_while_the_store_answers_its_probe_are_slowness_not_an_outage",),
    ),
    Mutation(
        "H2",
        "lending: a lender lends at most its own CU",
        "entitlements/models/grants.py",
        "elif self.cu is not None and self.lending_limit_cu > self.cu:",
        "elif False:",
        (ADM + "test_lending.py::test_grant_with_a_bad_lending_limit_or_weight_is_a_400_naming_the_field",),
    ),
    Mutation(
        "H3",
        "fair share: a borrower's weight is greater than 0 and at most MAX_WEIGHT",
        "entitlements/models/grants.py",
        "elif not 0 < self.weight <= MAX_WEIGHT:",
        "elif not 0 < self.weight:",
        (ADM + "test_lending.py::test_the_service_refuses_a_bad_weight_naming_it_before_the_database_does",),
    ),
    Mutation(
        "H4",
        "spillover: a scope spills only to its own tenant's entitlement",
        "entitlements/models/grants.py",
        "elif target.tenant_id != self.tenant_id:",
        "elif False:",
        (ADM + "test_spillover_api.py::test_a_bad_spillover_is_a_400_naming_the_field",),
    ),
    Mutation(
        "H5",
        "remaining-quota headers: each period budget's remaining amount is sent",
        "admission/core.py",
        'names += [f"x-headroom-budget-remaining-{p.kind}" for p in lim.periods] if lim else []',
        "names += []",
        (ADM + "test_quota_headers.py::test_http_request_rate_and_budgets_have_their_headers",),
    ),
    Mutation(
        "H6",
        "OIDC: an expired ID token is refused (only OIDC_CLOCK_SKEW_S of leeway)",
        "accounts_oidc/backends.py",
        'leeway=self.get_settings("OIDC_CLOCK_SKEW_S", 60),',
        "leeway=10**9,",
        ("tests/security/test_oidc.py::test_an_expired_id_token_is_refused",),
    ),
    Mutation(
        "H7",
        "OIDC: an ID token minted for another sign-in (its nonce) is refused",
        "accounts_oidc/backends.py",
        'kwargs.get("nonce") != payload.get("nonce")',
        "False",
        (
            "tests/security/test_oidc.py::test_an_id_token_from_another_issuer_or_unsigned_or_for_another_sign_in_is_refused",
        ),
    ),
    Mutation(
        "H8",
        "served_from: a pool slug only (no markup, blanks or paths a page would show)",
        "telemetry/validation.py",
        "if not isinstance(v, str) or len(v) > POOL_MAX or not SLUG.fullmatch(v):",
        "if not isinstance(v, str) or len(v) > POOL_MAX:",
        ("tests/telemetry/test_served_from.py::test_a_bad_served_from_is_a_400_naming_it",),
    ),
    Mutation(
        "H9",
        "admission surrogates: a lone UTF-16 surrogate in a reserve is a 400 naming the field",
        "http_plumbing/api_guards.py",
        'UNSTORABLE = re.compile("[\\x00\\ud800-\\udfff]")',
        'UNSTORABLE = re.compile("[\\x00]")',
        (ADM + "test_surrogates.py::test_a_reserve_with_a_lone_surrogate_is_a_400_naming_the_field",),
        equivalent="admission/services.py's reserve parser refuses a lone surrogate itself (SURROGATE_MESSAGE, "
        "its _surrogates check): with both taken out by hand the test fails; the shared guard matters for "
        "the other APIs' JSON bodies, and alone here if the parser's check goes",
    ),
    Mutation(
        "H10",
        "trace upload: the API refuses a file over TRACE_MAX_BYTES",
        "sizing/api.py",
        "        if upload.size > _max_trace_bytes():",
        "        if False:",
        ("tests/sizing/test_trace_bound.py::test_the_api_refuses_a_file_one_byte_over_the_bound_and_takes_one_at_it",),
    ),
    Mutation(
        "H11",
        "trace upload: the calculator page refuses a file over TRACE_MAX_BYTES",
        "portal/views/sizing.py",
        "    elif upload.size > settings.TRACE_MAX_BYTES:",
        "    elif False:",
        ("tests/sizing/test_trace_bound.py::test_the_page_refuses_a_file_one_byte_over_the_bound_and_takes_one_at_it",),
    ),
    Mutation(
        "H12",
        "webhook guard: every address a tenant's URL resolves to must be global, not only the first",
        "alerts/webhooks.py",
        "        for ip in ips:",
        "        for ip in ips[:1]:",
        ("tests/alerts/test_ssrf.py::test_every_resolved_address_must_be_global_not_only_the_first",),
    ),
    Mutation(
        "H13",
        "point choice: the cheapest feasible point wins, not the one with the fewest accelerators",
        "capacity/sizing.py",
        "key=lambda i: (results[i].cost.per_hour.value, results[i].accelerators, i)",
        "key=lambda i: (results[i].accelerators, results[i].cost.per_hour.value, i)",
        ("tests/capacity/test_point_choice.py::test_eight_cheap_accelerators_win_over_one_dearer_one",),
    ),
    Mutation(
        "H14",
        "gateway client: a refused token (401/403) refuses every class, not the fail mode's admit",
        "admission/client.py",
        "        if status in (401, 403):",
        "        if False:",
        (ADM + "test_client.py::test_a_refused_token_refuses_every_class_and_is_logged_once_a_minute",),
    ),
    Mutation(
        "H15",
        "OIDC lockout: failures count per (issuer, subject), so one refused identity locks only itself",
        "accounts_oidc/lockout.py",
        'return f"oidc:{issuer}#{subject}"',
        'return f"oidc:{issuer}"',
        ("tests/security/test_oidc_lockout.py::test_refused_identities_from_many_addresses_do_not_stop_a_good_one",),
    ),
    Mutation(
        "H16",
        "import_atlas: an apply never lowers an entitlement's CU without --allow-lower",
        "admission/atlas_import.py",
        "if kp.lowers_cu and not allow_lower:",
        "if False:",
        (ADM + "test_import_atlas.py::test_a_changed_limit_in_atlas_is_an_update_audited_by_the_importer",),
    ),
    Mutation(
        "H17",
        "run_all supervision: a child that keeps exiting is started again after a doubling back-off",
        "bin/run_all.py",
        "delay = min(self.backoff_s * 2**n, self.backoff_max_s)",
        "delay = self.backoff_s",
        (
            "tests/bin/test_run_all.py::test_a_child_that_exits_is_started_again_with_back_off_and_the_rest_keep_running",
        ),
    ),
)
