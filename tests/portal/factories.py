"""Launch requests for tests, made the way people make them: through the intake service (which
validates, derives the regions' rows and writes the first event), from a complete request's fields."""

from __future__ import annotations

from typing import Any

from tests.portal.intake.launch_fields import complete_fields


def launch_request(fleet: Any, actor: Any, **over: Any) -> Any:
    """A draft launch request by `actor` (a requester of fleet.acme) for the fleet's model and region."""
    from portal.services.intake import launch_request_create

    return launch_request_create(actor=actor, **complete_fields(fleet, **over))
