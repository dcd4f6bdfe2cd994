"""What an approval question shows of what a held action would submit: bounded, and secrets masked."""

from __future__ import annotations

import json

import pytest

from tools.browser_tasks.submission import (
    ADDRESS_MAX,
    BODY_MAX,
    FIELDS_MAX,
    MASK,
    NAME_MAX,
    VALUE_MAX,
    Controls,
    Submission,
    address_shown,
    body_preview,
    controls_from,
    form_submission,
    request_submission,
)

SHOP = "https://shop.example/pay"


def entry(name: str, value: str, **control: str) -> dict[str, str]:
    return {"name": name, "value": value, "type": "text", **control}


def form(*entries: dict[str, str], method: str = "post", action: str = SHOP, total: int | None = None) -> dict:
    raw: dict = {"method": method, "action": action, "fields": list(entries)}
    if total is not None:
        raw["total"] = total
    return raw


def submitted(raw: dict, *, button: str | None = None, button_text: str | None = None) -> Submission:
    """The form's submission, which must exist."""
    submission = form_submission(raw, button=button, button_text=button_text)
    assert submission is not None
    return submission


def shown(submission) -> list[tuple[str, str]]:
    return [(field["name"], field["value"]) for field in submission["fields"]]


def test_it_shows_a_forms_address_button_and_fields_with_the_password_masked_and_the_hidden_field_marked():
    raw = form(
        entry("holder", "Alice Example"),
        entry("p", "hunter2-x", type="password"),
        entry("basket", "kettle-42", type="hidden"),
    )

    assert submitted(raw, button="Pay now", button_text="Pay now") == {
        "form": True,
        "method": "POST",
        "address": SHOP,
        "button": "Pay now",
        "button_text": None,
        "fields": [
            {"name": "holder", "value": "Alice Example", "hidden": False, "masked": False, "cut": False},
            {"name": "p", "value": MASK, "hidden": False, "masked": True, "cut": False},
            {"name": "basket", "value": "kettle-42", "hidden": True, "masked": False, "cut": False},
        ],
        "fields_more": 0,
        "body": None,
        "body_cut": False,
    }


@pytest.mark.parametrize(
    "control",
    [
        {"name": "x", "type": "password"},
        {"name": "x", "type": "PASSWORD"},
        {"name": "x", "autocomplete": "section-a current-password"},
        {"name": "x", "autocomplete": "one-time-code"},
        {"name": "x", "autocomplete": "billing cc-number"},
        {"name": "x", "autocomplete": "cc-csc"},
        {"name": "password"},
        {"name": "userPassword2"},
        {"name": "user[password]"},
        {"name": "passcode"},
        {"name": "pin"},
        {"name": "card_pin"},
        {"name": "cvv"},
        {"name": "card_cvc2"},
        {"name": "cardNumber"},
        {"name": "cc-number"},
        {"name": "security_code"},
        {"name": "otp"},
        {"name": "csrfmiddlewaretoken"},
        {"name": "api_key"},
        {"name": "Kennwort"},
        {"name": "mot_de_passe"},
        {"name": "contraseña"},
        {"name": "p\u0430ssword"},  # a Cyrillic "a"
        {"name": "f3", "label": "PIN"},
        {"name": "f4", "label": "Card number"},
    ],
)
def test_a_secret_field_is_masked_by_its_type_autocomplete_name_or_label(control):
    submission = submitted(form(entry(value="s3cret-value", **control)))

    [field] = submission["fields"]
    assert (field["value"], field["masked"]) == (MASK, True)
    assert "s3cret-value" not in json.dumps(submission)


@pytest.mark.parametrize(
    "name", ["email", "holder", "iban", "account_number", "expiry", "card_holder", "shipping", "spin", "opinion"]
)
def test_what_the_owner_must_see_is_not_masked(name):
    submission = submitted(form(entry(name, "DE89 3704 0044 0532 0130 00")))

    assert shown(submission) == [(name, "DE89 3704 0044 0532 0130 00")]
    assert submission["fields"][0]["masked"] is False


def test_a_value_a_masked_field_holds_is_masked_under_any_name():
    raw = form(entry("pw", "hunter2", type="password"), entry("pw_copy", "hunter2"), entry("note", "hunter"))

    submission = submitted(raw)

    assert shown(submission) == [("pw", MASK), ("pw_copy", MASK), ("note", "hunter")]


def test_an_empty_password_is_masked_too():
    submission = submitted(form(entry("password", "", type="password")))

    assert shown(submission) == [("password", MASK)]


def test_a_value_is_cut_at_its_bound_and_a_name_at_its_own():
    raw = form(
        entry("exact", "v" * VALUE_MAX),
        entry("over", "w" * (VALUE_MAX + 1)),
        entry("n" * (NAME_MAX + 1), "x"),
    )

    submission = submitted(raw)

    exact, over, long_name = submission["fields"]
    assert (exact["value"], exact["cut"]) == ("v" * VALUE_MAX, False)
    assert (over["value"], over["cut"]) == ("w" * VALUE_MAX, True)
    assert long_name["name"] == "n" * NAME_MAX


def test_at_most_the_bound_of_fields_is_listed_and_the_rest_counted():
    exactly = submitted(form(*[entry(f"f{i}", "v") for i in range(FIELDS_MAX)]))
    one_more = submitted(form(*[entry(f"f{i}", "v") for i in range(FIELDS_MAX + 1)]))
    # The page reads a bounded number of fields and counts them all.
    read_fewer = submitted(form(*[entry(f"f{i}", "v") for i in range(40)], total=250))

    assert (len(exactly["fields"]), exactly["fields_more"]) == (FIELDS_MAX, 0)
    assert (len(one_more["fields"]), one_more["fields_more"]) == (FIELDS_MAX, 1)
    assert [f["name"] for f in one_more["fields"]] == [f"f{i}" for i in range(FIELDS_MAX)]
    assert (len(read_fewer["fields"]), read_fewer["fields_more"]) == (FIELDS_MAX, 250 - FIELDS_MAX)


def test_a_get_forms_fields_replace_its_query_and_a_dialogs_form_sends_nothing():
    raw = form(entry("q", "kettle"), method="get", action="https://shop.example/search?old=1#top")

    submission = submitted(raw, button="Search")

    assert (submission["method"], submission["address"]) == ("GET", "https://shop.example/search")
    assert shown(submission) == [("q", "kettle")]
    assert form_submission(form(entry("q", "x"), method="dialog")) is None
    assert form_submission(None) is None
    assert form_submission({"method": "post"}) is None


def test_the_buttons_visible_text_is_shown_beside_an_accessible_name_that_says_something_else():
    lying = submitted(form(), button="Read more", button_text="Buy now")
    plain = submitted(form(), button="Place order", button_text="Place order")

    assert (lying["button"], lying["button_text"]) == ("Read more", "Buy now")
    assert (plain["button"], plain["button_text"]) == ("Place order", None)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://alice:hunter2@shop.example/pay?item=kettle#done", "https://shop.example/pay?item=kettle"),
        (
            "https://shop.example:8443/a?password=hunter2&q=a%20b",
            f"https://shop.example:8443/a?password={MASK}&q=a%20b",
        ),
        (
            "https://shop.example/a?cardNumber=4111&pin=1234&id=7",
            f"https://shop.example/a?cardNumber={MASK}&pin={MASK}&id=7",
        ),
        ("wss://user@[::1]:9000/socket?token=abc", f"wss://[::1]:9000/socket?token={MASK}"),
        ("HTTPS://Shop.Example/Pay", "https://shop.example/Pay"),
        ("https://shop.example:99999/", "(an address that could not be read)"),
    ],
)
def test_an_address_has_no_userinfo_no_fragment_and_secret_query_values_masked(url, expected):
    assert address_shown(url) == expected


def test_an_address_is_cut_at_its_bound():
    base = "https://shop.example/"
    exact = base + "a" * (ADDRESS_MAX - len(base))
    over = exact + "b"

    assert address_shown(exact) == exact
    assert address_shown(over) == exact[: ADDRESS_MAX - 1] + "…"
    assert len(address_shown(over)) == ADDRESS_MAX


def test_a_query_value_a_masked_control_holds_is_masked():
    controls = Controls(secret_values=frozenset({"hunter2"}))

    assert address_shown("https://shop.example/?p=hunter2&q=kettle", controls=controls) == (
        f"https://shop.example/?p={MASK}&q=kettle"
    )


def test_a_held_form_post_lists_its_fields_masked_and_marked_by_what_the_page_says_of_its_controls():
    controls = controls_from(
        [
            {"name": "holder", "type": "text", "label": "Card holder", "value": "Alice Example"},
            {"name": "p", "type": "password", "label": "", "value": "hunter2-x"},
            {"name": "basket", "type": "hidden", "value": "kettle-42"},
            "not a control",
        ]
    )

    submission = request_submission(
        method="POST",
        url="https://shop.example/pay",
        body="holder=Alice+Example&p=hunter2-x&basket=kettle-42",
        content_type="application/x-www-form-urlencoded",
        form=True,
        controls=controls,
        button="Next",
    )

    assert submission["form"] is True
    assert submission["button"] == "Next"
    assert [(f["name"], f["value"], f["hidden"], f["masked"]) for f in submission["fields"]] == [
        ("holder", "Alice Example", False, False),
        ("p", MASK, False, True),
        ("basket", "kettle-42", True, False),
    ]
    assert "hunter2-x" not in json.dumps(submission)


def test_a_held_get_form_lists_its_query_as_fields():
    submission = request_submission(
        method="GET", url="https://shop.example/find?q=kettle&pin=1234", body=None, content_type="", form=True
    )

    assert submission["address"] == "https://shop.example/find"
    assert shown(submission) == [("q", "kettle"), ("pin", MASK)]


def test_a_multipart_body_lists_its_parts_and_a_files_name():
    boundary = "----b0und"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nHello\r\nthere\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="password"\r\n\r\nhunter2\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="photo"; filename="kettle.png"\r\n'
        f"Content-Type: image/png\r\n\r\n\x89PNG...\r\n--{boundary}--\r\n"
    )

    submission = request_submission(
        method="POST",
        url=SHOP,
        body=body,
        content_type=f"multipart/form-data; boundary={boundary}",
        form=False,
    )

    assert shown(submission) == [("note", "Hello\nthere"), ("password", MASK), ("photo", "kettle.png")]


def test_a_json_body_is_previewed_with_secret_keys_masked_at_any_depth_and_secret_values_under_any_key():
    body = json.dumps(
        {"holder": "Alice", "p": "hunter2-x", "card": {"number": "4111", "cvc": "123"}, "items": [{"token": "t"}]}
    )
    controls = Controls(secret_values=frozenset({"hunter2-x"}))

    submission = request_submission(
        method="POST", url=SHOP, body=body, content_type="application/json", form=False, controls=controls
    )

    assert submission["fields"] == []
    assert submission["body"] == json.dumps(
        {"holder": "Alice", "p": MASK, "card": {"number": "4111", "cvc": MASK}, "items": [{"token": MASK}]},
        ensure_ascii=False,
    )
    assert submission["body_cut"] is False


def test_a_json_body_masks_a_secret_inside_a_longer_string_and_a_pin_sent_as_a_number():
    body = json.dumps(
        {
            "query": 'mutation { login(user: "alice", password: "hunter2-x") }',
            "data": "user=alice&password=s3cret",
            "pin": 4711,
            "count": 2,
            "ok": True,
        }
    )
    controls = Controls(secret_values=frozenset({"hunter2-x", "4711"}))

    preview, cut = body_preview(body, controls)

    assert "hunter2-x" not in preview
    assert "s3cret" not in preview
    assert "4711" not in preview
    assert json.loads(preview) == {
        "query": f'mutation {{ login(user: "alice", password: {MASK}) }}',
        "data": f"user=alice&password={MASK}",
        "pin": MASK,
        "count": 2,
        "ok": True,
    }
    assert cut is False


def test_a_text_body_has_secret_pairs_and_the_pages_secret_values_masked():
    controls = Controls(secret_values=frozenset({"hunter2-x", "abc"}))

    preview, cut = body_preview('user=alice&password=s3cret; {"pin": "1234", "n": 1} sent hunter2-x abc', controls)

    assert preview == f'user=alice&password={MASK}; {{"pin": {MASK}, "n": 1}} sent {MASK} abc'
    assert cut is False


def test_a_body_preview_is_cut_at_its_bound():
    assert body_preview("a" * BODY_MAX) == ("a" * BODY_MAX, False)
    assert body_preview("a" * (BODY_MAX + 1)) == ("a" * BODY_MAX, True)
    assert body_preview("\x00\x01binary") == ("(binary data)", False)


def test_a_websocket_and_a_body_less_post_show_method_and_address_only():
    socket = request_submission(
        method="WEBSOCKET", url="ws://shop.example/live?token=abc", body=None, content_type="", form=False
    )
    post = request_submission(method="post", url=SHOP, body=None, content_type="", form=False, button="Add to cart")

    assert (socket["method"], socket["address"], socket["body"], socket["fields"]) == (
        "WEBSOCKET",
        f"ws://shop.example/live?token={MASK}",
        None,
        [],
    )
    assert (post["method"], post["address"], post["button"], post["body"]) == ("POST", SHOP, "Add to cart", None)


def test_page_text_loses_control_characters_and_lone_surrogates_so_it_can_be_stored():
    raw = form(entry("no\x00te", "line one\r\nline\ttwo\x1b[31m\ud800"))

    submission = submitted(raw, button="Pay\x00 now")

    assert shown(submission) == [("note", "line one\nline\ttwo[31m")]
    assert submission["button"] == "Pay now"
    json.dumps(submission).encode("utf-8")  # storable: no lone surrogate left
