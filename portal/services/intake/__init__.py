"""The launch-intake workflow (issue 13). Every step: find the request as the actor may see it (else 404),
check the actor may take this step (else 403), lock the row and check the state (else 409), validate input
(else 400), move the state, write the event, schedule the emails on commit (steps.py).

The writes: drafts.py (file, edit, submit, withdraw, delete), decisions.py (approve, partially approve,
reject, return) with placement.py (the start date and pool per region a decision grants to). The reads are
selectors in portal.intake_selectors, the errors in portal.intake_errors (404 / 403 / 409, HeadroomGone a 409;
django's ValidationError 400). The names callers use are all here, so `intake.launch_request_approve` reads
as before.
"""

from portal.intake_errors import HeadroomGone, LaunchRequestConflict, LaunchRequestForbidden, LaunchRequestNotFound
from portal.intake_selectors import (
    EDITABLE_FIELDS,
    default_pool,
    launch_request_get,
    launch_request_missing,
    pool_choices,
    serving_pools,
    snapshot,
)
from portal.services.intake.decisions import (
    launch_request_approve,
    launch_request_partially_approve,
    launch_request_reject,
    launch_request_return,
)
from portal.services.intake.drafts import (
    launch_request_create,
    launch_request_create_or_update,
    launch_request_delete,
    launch_request_submit,
    launch_request_update,
    launch_request_withdraw,
)
from portal.services.intake.placement import Placement

__all__ = [
    "EDITABLE_FIELDS",
    "HeadroomGone",
    "LaunchRequestConflict",
    "LaunchRequestForbidden",
    "LaunchRequestNotFound",
    "Placement",
    "default_pool",
    "launch_request_approve",
    "launch_request_create",
    "launch_request_create_or_update",
    "launch_request_delete",
    "launch_request_get",
    "launch_request_missing",
    "launch_request_partially_approve",
    "launch_request_reject",
    "launch_request_return",
    "launch_request_submit",
    "launch_request_update",
    "launch_request_withdraw",
    "pool_choices",
    "serving_pools",
    "snapshot",
]
