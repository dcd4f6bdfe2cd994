"""Pages: sign-in, sign-out, the chat shell and the settings page."""

from __future__ import annotations

from django import forms
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods, require_POST

from attachments.limits import FILE_MAX, MESSAGE_BYTES_MAX, MESSAGE_FILES_MAX
from conversations.instructions import MAX_UTF16 as INSTRUCTIONS_MAX_UTF16
from conversations.instructions import PRODUCT_RULES
from conversations.providers.catalog import KEYED_PROVIDERS, PROVIDER_LABELS
from conversations.services import NAME_MAX_UTF16
from conversations.turns import MAX_TEXT_UTF16
from flarebot.core.errors import FlarebotError, LimitReached
from flarebot.core.sessions import SessionState, owner_session_end, owner_session_state
from flarebot.core.setup_link import owner_setup, setup_attempt
from flarebot.core.signin import owner_signin
from memory.query import QUERY_MAX
from memory.services import MAX_CONTENT, MAX_FACTS
from tasks.schedule import CRON_MAX
from tasks.services import INSTRUCTIONS_MAX, MAX_TASKS, NAME_MAX
from tools.registry import tools_citing_sources


class SignInForm(forms.Form):
    username = forms.CharField(max_length=150, strip=False)
    password = forms.CharField(max_length=4096, strip=False, widget=forms.PasswordInput)


class SetupForm(forms.Form):
    username = forms.CharField(max_length=150, strip=True)
    password = forms.CharField(max_length=4096, strip=False, widget=forms.PasswordInput)
    password_again = forms.CharField(max_length=4096, strip=False, widget=forms.PasswordInput)


def _is_owner(request: HttpRequest) -> bool:
    installation = request.flarebot_installation  # type: ignore[attr-defined]
    state = owner_session_state(session=request.session, user=request.user, installation=installation)
    return state is SessionState.VALID


def _safe_next(request: HttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or "/"
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=False):
        return target if target.startswith("/") and not target.startswith("//") else "/"
    return "/"


@require_http_methods(["GET", "HEAD"])
def home(request: HttpRequest) -> HttpResponse:
    """Show the chat page to the owner; send anyone else to the sign-in page."""
    if not _is_owner(request):
        return HttpResponseRedirect("/login/")
    limits = {
        "message": MAX_TEXT_UTF16,
        "name": NAME_MAX_UTF16,
        "query": QUERY_MAX,
        # Attachments' limits (attachments/limits.py), enforced on the page before upload.
        "file_bytes": FILE_MAX,
        "message_files": MESSAGE_FILES_MAX,
        "message_bytes": MESSAGE_BYTES_MAX,
    }
    # The tools whose results carry sources, listed under the answer (`Tool.cites_sources`).
    return render(request, "chat.html", {"limits": limits, "source_tools": tools_citing_sources()})


@require_http_methods(["GET", "HEAD"])
def settings_page(request: HttpRequest) -> HttpResponse:
    """Show the settings page to the owner; send anyone else to sign in and come back."""
    if not _is_owner(request):
        return HttpResponseRedirect("/login/?next=/settings/")
    keyed = [(provider, PROVIDER_LABELS[provider]) for provider in KEYED_PROVIDERS]
    limits = {
        "instructions": INSTRUCTIONS_MAX_UTF16,
        "memory_facts": MAX_FACTS,
        "memory_length": MAX_CONTENT,
        "tasks": MAX_TASKS,
        "task_name": NAME_MAX,
        "task_instructions": INSTRUCTIONS_MAX,
        "task_cron": CRON_MAX,
    }
    context = {"keyed_providers": keyed, "limits": limits, "product_rules": PRODUCT_RULES}
    return render(request, "settings.html", context)


@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def login_view(request: HttpRequest) -> HttpResponse:
    """Sign the owner in; failures are throttled and never say which part was wrong."""
    if request.method != "POST" and _is_owner(request):
        return HttpResponseRedirect(_safe_next(request))
    form = SignInForm(request.POST if request.method == "POST" else None)
    status = 200
    error = ""
    if request.method == "POST":
        if form.is_valid():
            try:
                if owner_signin(
                    request=request,
                    installation=request.flarebot_installation,  # type: ignore[attr-defined]
                    username=form.cleaned_data["username"],
                    password=form.cleaned_data["password"],
                ):
                    return HttpResponseRedirect(_safe_next(request))
                error, status = "That username and password do not match.", 400
            except LimitReached as limit:
                error, status = limit.message, 429
        else:
            error, status = "Enter a username and a password.", 400
    context = {"form": form, "error": error, "next": _safe_next(request)}
    return render(request, "login.html", context, status=status)


@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def setup_view(request: HttpRequest) -> HttpResponse:
    """Create the first owner from the one-time link `make run` printed; 404 without it or once an owner exists."""
    token = (request.POST if request.method == "POST" else request.GET).get("token", "")
    try:
        if not setup_attempt(request=request, token=token):
            raise Http404
    except LimitReached as limit:
        return _setup_page(request, SetupForm(), token="", error=limit.message, status=429)
    if request.method != "POST":
        return _setup_page(request, SetupForm(), token=token)
    form = SetupForm(request.POST)
    if not form.is_valid():
        return _setup_page(request, form, token=token, error="Enter a username and the password twice.", status=400)
    if form.cleaned_data["password"] != form.cleaned_data["password_again"]:
        return _setup_page(request, form, token=token, error="The two passwords differ.", status=400)
    try:
        owner_setup(request=request, username=form.cleaned_data["username"], password=form.cleaned_data["password"])
    except FlarebotError as refused:
        return _setup_page(request, form, token=token, error=refused.message, status=refused.status)
    return HttpResponseRedirect("/")


def _setup_page(
    request: HttpRequest, form: SetupForm, *, token: str, error: str = "", status: int = 200
) -> HttpResponse:
    response = render(request, "setup.html", {"form": form, "token": token, "error": error}, status=status)
    # The page's own URL holds the token: requests it makes name only the origin (a form post
    # still carries the Origin header, which "no-referrer" would make null).
    response["Referrer-Policy"] = "strict-origin"
    return response


@csrf_protect
@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """Sign out and close this session's sockets."""
    owner_session_end(request=request)
    return HttpResponseRedirect("/login/")
