"""Which actions the runtime holds for the owner, from the element alone."""

from __future__ import annotations

import pytest

from tools.browser_tasks.critical import critical_point_of
from tools.browser_tasks.page import observation_from, observation_text


def button(name: str, **extra: object) -> dict[str, object]:
    return {"role": "button", "name": name, "tag": "button", "type": "button", "submit": False, **extra}


@pytest.mark.parametrize(
    ("name", "meaning"),
    [
        ("Buy now", "buying"),
        ("Proceed to checkout", "buying"),
        ("Place order", "ordering"),
        ("Pay 25.00 EUR", "paying"),
        ("Book this room", "booking"),
        ("Reserve a table", "reserving"),
        ("Send message", "sending"),
        ("Delete account", "deleting"),
        ("Subscribe to the newsletter", "subscribing"),
        ("Sign in", "signing in"),
        ("Log-in", "signing in"),
        ("Share my location", "sharing personal data"),
        ("Accept and continue", "sharing personal data"),
    ],
)
def test_a_click_on_a_name_that_reads_as_a_commitment_is_held(name, meaning):
    assert critical_point_of("click", button(name)) == f"reads as {meaning}"
    assert critical_point_of("click", {**button(name), "role": "link", "tag": "a"}) == f"reads as {meaning}"


@pytest.mark.parametrize("name", ["Add to cart", "View cart", "Next page", "Search", "Messages", "Sort by price", ""])
def test_ordinary_clicks_go_ahead(name):
    assert critical_point_of("click", button(name)) is None


def test_a_forms_submit_control_is_held_whatever_its_name():
    assert critical_point_of("click", button("Weiter", type="submit", submit=True)) == "submits a form"


@pytest.mark.parametrize(
    "field",
    [
        {"type": "password", "name": "Passwort"},
        {"type": "text", "autocomplete": "cc-number", "name": "Number"},
        {"type": "text", "autocomplete": "current-password", "name": "PIN"},
        {"type": "text", "name": "Card number"},
        {"type": "tel", "name": "CVV"},
        {"type": "text", "field": "iban", "name": "Account"},
    ],
)
def test_typing_into_a_password_or_payment_field_is_held(field):
    element = {"role": "textbox", "tag": "input", "submit": False, **field}
    assert critical_point_of("type", element) == "fills a password or payment field"
    assert critical_point_of("select", element) == "fills a password or payment field"


def test_typing_into_an_ordinary_field_goes_ahead():
    element = {"role": "textbox", "tag": "input", "type": "email", "name": "Your email", "field": "email"}
    assert critical_point_of("type", element) is None


def test_the_page_text_numbers_elements_and_never_carries_control_characters():
    observation = observation_from(
        {
            "title": "Shop\x07",
            "url": "http://shop.example/",
            "text": "Kettle\n25 EUR",
            "elements": [{"role": "button", "name": "Add\nto  cart"}, {"role": "link", "name": "Cart\x00"}, "junk"],
        }
    )

    assert observation is not None
    assert observation_text(observation).splitlines()[-3:] == [
        "Interactive elements:",
        '[1] button "Add to cart"',
        '[2] link "Cart"',
    ]
