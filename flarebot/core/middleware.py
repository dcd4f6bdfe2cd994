"""The request boundary: origin, installation, session and owner checks, in that order.

Everything under /api/ is answered in the contract's error shape (401, 403, 503), never
with a redirect; pages fall back to the sign-in page. /status/ and /static/ are public.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from flarebot.core.errors import error_body
from flarebot.core.hints import CREATE_OWNER_COMMAND
from flarebot.core.installation import installation_get_verified
from flarebot.core.models import Installation
from flarebot.core.sessions import SessionState, owner_session_state, session_cookie_count

Handler = Callable[[HttpRequest], HttpResponse]
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
PUBLIC_PREFIXES = ("/status/", "/static/")
API_PREFIX = "/api/"
# Reachable before an owner exists: the page itself answers 404 without the one-time token.
SETUP_PATH = "/setup/"
# What the refusals say; the web process says the same before it reads a body (flarebot.core.request_bounds).
ORIGIN_REFUSED_MESSAGE = "This request must come from Flarebot's own origin."
DUPLICATE_COOKIE_MESSAGE = "The session cookie was sent more than once."
SIGN_IN_MESSAGE = "Sign in to continue."


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def origin_refused(*, path: str, method: str, origin: str | None) -> bool:
    """Whether the Origin is refused: foreign on any method, or not Flarebot's own on an unsafe one."""
    if path == "/status/":
        return False
    own = settings.FLAREBOT_ORIGIN
    return (method not in SAFE_METHODS and origin != own) or (origin is not None and origin != own)


def refusal(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    """Answer with the contract's error shape for the API, plain text elsewhere."""
    if is_api(request):
        return JsonResponse(error_body(code, message), status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class PrivateResponseMiddleware:
    """Mark every response but static assets `Cache-Control: no-store`."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith("/static/"):
            response["Cache-Control"] = "no-store"
        return response


# Pages run only our own scripts and styles: a model answer that slipped past the
# Markdown sanitizer still could not run script, load from elsewhere or post away.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
# Django's admin templates still set a few inline styles.
ADMIN_CONTENT_SECURITY_POLICY = CONTENT_SECURITY_POLICY.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")


class ContentSecurityPolicyMiddleware:
    """Give every response the pages' Content-Security-Policy."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        admin = request.path.startswith("/admin/")
        response.headers.setdefault(
            "Content-Security-Policy", ADMIN_CONTENT_SECURITY_POLICY if admin else CONTENT_SECURITY_POLICY
        )
        return response


class OriginGuardMiddleware:
    """Require the exact configured Origin on unsafe methods; refuse foreign Origins anywhere."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if origin_refused(path=request.path, method=str(request.method), origin=request.headers.get("Origin")):
            return refusal(request, 403, "origin_refused", ORIGIN_REFUSED_MESSAGE)
        return self.get_response(request)


class InstallationGuardMiddleware:
    """Fail closed (503) when the installation row is missing or no longer matches its owner.

    Before an owner exists, pages explain how to create one (the setup link `make run`
    printed, or the command), and only /setup/ goes on.
    """

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(PUBLIC_PREFIXES):
            return self.get_response(request)
        installation = installation_get_verified()
        if installation is None:
            return self._unavailable(request)
        request.flarebot_installation = installation  # type: ignore[attr-defined]
        return self.get_response(request)

    def _unavailable(self, request: HttpRequest) -> HttpResponse:
        broken = Installation.objects.exists()
        if not broken and request.path == SETUP_PATH:
            request.flarebot_installation = None  # type: ignore[attr-defined]
            return self.get_response(request)
        if is_api(request):
            message = (
                "Flarebot's installation no longer matches its owner."
                if broken
                else f"Flarebot has no owner yet. Open the setup link `make run` printed, or: {CREATE_OWNER_COMMAND}"
            )
            return refusal(request, 503, "installation_unavailable", message)
        context = {"broken": broken, "command": CREATE_OWNER_COMMAND}
        return render(request, "no_owner.html", context, status=503)


class DuplicateSessionCookieMiddleware:
    """Refuse a request that carries the session cookie more than once."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if session_cookie_count(request.META.get("HTTP_COOKIE", "")) > 1:
            if is_api(request):
                return refusal(request, 401, "duplicate_cookie", DUPLICATE_COOKIE_MESSAGE)
            request.COOKIES.pop(settings.SESSION_COOKIE_NAME, None)
        return self.get_response(request)


class OwnerSessionMiddleware:
    """Enforce the absolute session lifetime and owner identity; guard /api/ with 401/403."""

    def __init__(self, get_response: Handler) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        installation = getattr(request, "flarebot_installation", None)
        if installation is None:
            return self.get_response(request)
        state = owner_session_state(session=request.session, user=request.user, installation=installation)
        if state is SessionState.NOT_OWNER and is_api(request):
            return refusal(request, 403, "not_owner", "Only Flarebot's owner may use it.")
        if state in (SessionState.EXPIRED, SessionState.NOT_OWNER):
            logout(request)  # pages then treat the visitor as signed out
        if is_api(request) and state is not SessionState.VALID:
            return refusal(request, 401, "not_authenticated", SIGN_IN_MESSAGE)
        return self.get_response(request)
