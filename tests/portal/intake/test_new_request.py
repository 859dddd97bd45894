"""GET /launch/new stores nothing; the first autosave of the page creates the one draft (issue 22)."""

import re

from portal.models import LaunchRequest
from tests.clients import web_client as _web

HX = {"HTTP_HX_REQUEST": "true"}


def _page_key(body: str) -> str:
    return re.search(r'name="draft" value="([0-9a-f-]+)"', body).group(1)


def test_opening_the_new_request_page_creates_nothing(fleet, people):
    c = _web(people.requester)
    resp = c.get("/launch/new")
    body = resp.content.decode()
    assert resp.status_code == 200 and 'id="lr-form"' in body
    assert 'hx-post="/launch/new"' in body  # the autosave goes to the create route until a draft exists
    assert LaunchRequest.objects.count() == 0


def test_typing_a_title_creates_exactly_one_draft_and_points_the_page_at_it(fleet, people):
    c = _web(people.requester)
    key = _page_key(c.get("/launch/new").content.decode())
    first = c.post("/launch/new", {"draft": key, "title": "Chat"}, **HX)
    req = LaunchRequest.objects.get()
    assert (req.title, str(req.uuid), req.created_by) == ("Chat", key, people.requester)
    assert first["HX-Push-Url"] == f"/launch/{req.uuid}/edit"
    assert f"/launch/{req.uuid}/sizing" in first["HX-Trigger"]
    assert f'hx-post="/launch/{req.uuid}/autosave"' in first.content.decode()
    # A second save of the same page (queued behind the first) updates that draft, never files another.
    again = c.post("/launch/new", {"draft": key, "title": "Chat assistant"}, **HX)
    assert again.status_code == 200 and "HX-Push-Url" not in again
    assert LaunchRequest.objects.count() == 1
    req.refresh_from_db()
    assert req.title == "Chat assistant"


def test_a_blank_save_stores_nothing(fleet, people):
    c = _web(people.requester)
    key = _page_key(c.get("/launch/new").content.decode())
    # What the untouched page posts: empty text, the default choices, the streaming box ticked.
    blank = {"draft": key, "title": "", "justification": "", "streaming": "on", "traffic_class": "reserved"}
    resp = c.post("/launch/new", blank, **HX)
    assert resp.status_code == 200 and "Nothing to save yet" in resp.content.decode()
    assert LaunchRequest.objects.count() == 0


def test_the_page_key_cannot_reach_another_tenants_request(fleet, people):
    theirs = _web(people.outsider)
    key = _page_key(theirs.get("/launch/new").content.decode())
    theirs.post("/launch/new", {"draft": key, "title": "Globex launch"}, **HX)
    resp = _web(people.requester).post("/launch/new", {"draft": key, "title": "hijack"}, **HX)
    assert resp.status_code == 409
    assert LaunchRequest.objects.get().title == "Globex launch"


def test_only_requesters_open_the_form(fleet, people):
    assert _web(people.viewer).get("/launch/new").status_code == 403
    assert _web(people.approver).get("/launch/new").status_code == 403
