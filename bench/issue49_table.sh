#!/usr/bin/env bash
# Issue 49's goals table in one pass (docs/benchmarks.md, "Issue 49"): each bench in turn, its output in OUTDIR.
# Run from the checkout: bash bench/issue49_table.sh OUTDIR. Needs redis-server on PATH (a private one on 6499 for
# the script benches), Redis on 6379 (db 13), PostgreSQL (database telemetry_bench), Envoy (.venv) and g++ + libgrpc++ for the front.
set -u
OUT=${1:?outdir}; mkdir -p "$OUT"
PY=.venv/bin/python
PORT=6499
redis-server --port $PORT --save '' --appendonly no --daemonize yes >/dev/null
sleep 0.5
stamp() { echo "=== $1 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"; }
{ stamp commands; .venv/bin/pytest -q -rA -p no:randomly tests/admission/test_commands_per_reserve.py 2>&1 | grep -E "^(PASSED|FAILED)|commands"; } > "$OUT/1_commands.txt" 2>&1
{ stamp per-call; BENCH_REDIS_URL=redis://127.0.0.1:$PORT/0 timeout 900 $PY bench/reserve_script.py --per-call --rounds 8; stamp end; } > "$OUT/2_script_percall.txt" 2>&1
{ stamp blocks; BENCH_REDIS_URL=redis://127.0.0.1:$PORT/1 timeout 900 $PY bench/reserve_script.py --rounds 6; stamp end; } > "$OUT/2_script_blocks.txt" 2>&1
redis-cli -p $PORT shutdown nosave >/dev/null 2>&1
{ stamp http; BENCH_REDIS_URL=redis://127.0.0.1:6379/13 timeout 900 $PY bench/admission.py --http-only; stamp end; } > "$OUT/3_http.txt" 2>&1
{ stamp modes; BENCH_REDIS_URL=redis://127.0.0.1:6379/13 timeout 900 $PY bench/admission.py --modes-only; stamp end; } > "$OUT/4_modes.txt" 2>&1
{ stamp envoy; BENCH_REDIS_URL=redis://127.0.0.1:6379/13 timeout 1200 $PY bench/gateway_envoy.py --latency-only --alone-s 16 --front-observes; stamp end; } > "$OUT/5_envoy.txt" 2>&1
{ stamp ingest; DATABASE_URL=postgres://postgres@127.0.0.1:5432/telemetry_bench timeout 1200 $PY bench/ingest.py 200000 10000 4; stamp end; } > "$OUT/6_ingest.txt" 2>&1
echo done > "$OUT/DONE"
