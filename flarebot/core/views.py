"""Public endpoints of the core: the health check, and the 404/500 answers."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from flarebot.core.errors import error_body


@require_safe
def status(request: HttpRequest) -> JsonResponse:
    """Say the web process is up, and nothing else."""
    return JsonResponse({"status": "ok"})


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Answer 404 in the API's error shape under /api/, as a page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("not_found", "Not found."), status=404)
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """Answer 500 without any detail of what went wrong."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("internal_error", "Something went wrong; try again."), status=500)
    return HttpResponse("Something went wrong; try again.", status=500, content_type="text/plain; charset=utf-8")
