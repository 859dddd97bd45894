"""Issue 30.2 in intake: the sizing panel shows the committed rate's CU to buy with its replay check,
the calculator's envelope rule (over-dispersed minutes), checked here by an independent replay."""

from __future__ import annotations

import re
from types import SimpleNamespace

from capacity.planning_workload import envelope_workload
from portal.sizing_fit import launch_shape
from tests.capacity.test_planning import independent_share
from tests.clients import web_client


def test_the_sizing_panel_shows_the_cu_to_buy_with_its_check(fleet, people, draft):
    form = {
        "model": "llama-test",
        "regions": ["us-test"],
        "prompt_p50": "1000",
        "output_p50": "200",
        "committed_value": "20",
        "committed_basis": "rps",
        "traffic_class": "reserved",
        "launch_date": str(draft.launch_date),
        "end_date": str(draft.end_date),
    }
    body = web_client(people.requester).post(f"/launch/{draft.uuid}/sizing", form).content.decode()
    line = body.split('id="intake-cu-to-buy">')[1].split("</p>")[0]
    cu = float(re.search(r"<strong>([\d.,]+) CU</strong>", line).group(1).replace(",", ""))
    assert "replayed" in line and "(target 0.1 %)" in line and "coefficient of variation 0.21" in line
    # The same requests, replayed independently: at or under the target at the answer, over it one step less.
    shape = launch_shape(
        SimpleNamespace(
            prompt_p50=1000,
            prompt_p95=None,
            max_prompt_tokens=None,
            output_p50=200,
            output_p95=None,
            max_output_tokens=None,
        )  # fmt: skip
    )
    w = envelope_workload(rate_rps=20, prompt=shape.prompt, output=shape.output, w_out=4.0, w_cached=0.0)
    t, c = w.arrival_s, w.cost_wt
    assert independent_share(t, c, cu) <= 0.001 < independent_share(t, c, round(cu - 0.1, 1))
    # 20 req/s × 1,800 wt is 36 CU at the mean; busier minutes ask more. The scenario's CU (what an
    # approval grants) is this answer, with the same check beside it.
    assert cu == 37.2
    assert '<td class="num" data-scenario="committed">37.200</td>' in body
    assert "= 36.000 CU at the mean rate" in body
    check = body.split('data-check="committed">')[1].split("</td>")[0]
    assert "37.2 CU: replayed 72,545 requests, 0.08 % throttled (target 0.1 %); at 37.1 CU 0.156 %" in check
