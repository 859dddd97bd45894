"""Launch-request endpoints. Each parses, calls one service, renders; errors map as the services
document them: not visible 404, wrong role or self-approval 403, wrong state 409, bad input 400."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from entitlements import roles
from entitlements.permissions import IsPerson
from portal.api.serializers import ApproveIn, CommentIn, LaunchRequestIn, LaunchRequestOut, PartialApproveIn
from portal.forms import LaunchRequestFilter
from portal.models import LaunchRequest
from portal.selectors import launch_requests_visible_to
from portal.services import intake


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "not allowed in the request's current state"


def call(fn: Callable[..., LaunchRequest], **kwargs: Any) -> LaunchRequest:
    try:
        return fn(**kwargs)
    except intake.LaunchRequestNotFound:
        raise exceptions.NotFound("no such launch request")
    except intake.LaunchRequestForbidden as exc:
        raise exceptions.PermissionDenied(str(exc))
    except intake.LaunchRequestConflict as exc:
        raise Conflict(str(exc))


def render(request: Request, req: LaunchRequest, code: int = status.HTTP_200_OK) -> Response:
    req = intake.launch_request_get(actor=request.user, request=req.uuid)
    return Response(LaunchRequestOut(req, context={"with_events": True, "with_sizing": True}).data, status=code)


class LaunchRequestList(generics.ListAPIView):
    permission_classes = [IsPerson]
    serializer_class = LaunchRequestOut
    filterset_class = LaunchRequestFilter

    def get_queryset(self) -> Any:
        return launch_requests_visible_to(self.request.user).select_related("tenant", "model", "created_by")

    @extend_schema(request=LaunchRequestIn, responses={201: LaunchRequestOut})
    def post(self, request: Request) -> Response:
        body = LaunchRequestIn(data=request.data)
        body.is_valid(raise_exception=True)
        req = call(intake.launch_request_create, actor=request.user, **body.validated_data)
        return render(request, req, status.HTTP_201_CREATED)


class LaunchRequestDetail(APIView):
    permission_classes = [IsPerson]

    @extend_schema(responses=LaunchRequestOut)
    def get(self, request: Request, uuid: str) -> Response:
        req = call(intake.launch_request_get, actor=request.user, request=uuid)
        return Response(LaunchRequestOut(req, context={"with_events": True, "with_sizing": True}).data)

    @extend_schema(request=LaunchRequestIn, responses=LaunchRequestOut)
    def patch(self, request: Request, uuid: str) -> Response:
        # Visibility first, so another tenant's member learns nothing from a validation error.
        call(intake.launch_request_get, actor=request.user, request=uuid)
        body = LaunchRequestIn(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        req = call(intake.launch_request_update, actor=request.user, request=uuid, **body.validated_data)
        return render(request, req)


class _Step(APIView):
    permission_classes = [IsPerson]
    service: Callable[..., LaunchRequest]
    body: type[serializers.Serializer] = CommentIn

    def kwargs_from(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"comment": data["comment"]}

    def post(self, request: Request, uuid: str) -> Response:
        call(intake.launch_request_get, actor=request.user, request=uuid)
        body = self.body(data=request.data)
        body.is_valid(raise_exception=True)
        req = call(type(self).service, actor=request.user, request=uuid, **self.kwargs_from(body.validated_data))
        return render(request, req)


def step(service: Callable[..., LaunchRequest], *, with_comment: bool = True) -> type[_Step]:
    attrs: dict[str, Any] = {"service": staticmethod(service)}
    if not with_comment:
        attrs["kwargs_from"] = lambda self, data: {}
    view = type(f"{service.__name__}_view", (_Step,), attrs)
    return extend_schema(request=CommentIn, responses=LaunchRequestOut)(view)


class Approve(_Step):
    service = staticmethod(intake.launch_request_approve)
    body = ApproveIn

    def kwargs_from(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"comment": data["comment"], "term": data["term"]}

    @extend_schema(request=ApproveIn, responses=LaunchRequestOut)
    def post(self, request: Request, uuid: str) -> Response:
        # The role decides before the body does (as for a partial approval).
        call(intake.launch_request_get, actor=request.user, request=uuid)
        if not roles.has_any(request.user, roles.APPROVER):
            raise exceptions.PermissionDenied("only an approver may approve a launch request")
        return super().post(request, uuid)


class PartiallyApprove(_Step):
    service = staticmethod(intake.launch_request_partially_approve)
    body = PartialApproveIn

    def kwargs_from(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"region_cu": data["regions"], "comment": data["comment"], "term": data["term"]}

    @extend_schema(request=PartialApproveIn, responses=LaunchRequestOut)
    def post(self, request: Request, uuid: str) -> Response:
        # The role decides before the body does: a teammate without it learns 403, not a field list.
        call(intake.launch_request_get, actor=request.user, request=uuid)
        if not roles.has_any(request.user, roles.APPROVER):
            raise exceptions.PermissionDenied("only an approver may partially approve a launch request")
        return super().post(request, uuid)
