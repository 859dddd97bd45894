"""The launch-intake workflow's errors, mapped to HTTP by the views: LaunchRequestNotFound 404,
LaunchRequestForbidden 403, LaunchRequestConflict 409 (HeadroomGone included); django's ValidationError 400.
Here, beneath both the reads (portal.intake_selectors) and the steps (portal.services.intake)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied


class LaunchRequestNotFound(Exception):
    """Not there, or not visible to this person (another tenant's request looks the same)."""


class LaunchRequestForbidden(PermissionDenied):
    pass


class LaunchRequestConflict(Exception):
    """The step is not allowed from the request's current state (or the state moved under us)."""


class HeadroomGone(LaunchRequestConflict):
    """Approval would oversell a pool: headroom was taken after the request was sized."""
