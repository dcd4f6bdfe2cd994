"""Which actions the runtime holds for the owner, from the element alone."""

from __future__ import annotations

import pytest

from tools.browser_tasks.critical import critical_point_of, go_to_critical
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


@pytest.mark.parametrize(
    ("name", "meaning"),
    [
        ("Withdraw funds", "paying"),
        ("Place bid", "bidding"),
        ("Forward", "sending"),
        ("Empty trash", "deleting"),
        ("Move to trash", "deleting"),
        ("Change password", "changing the account"),
        ("Disable 2FA", "changing the account"),
        ("Make admin", "changing the account"),
        ("Deploy", "deploying"),
        ("Sell my shares", "selling"),
        ("Complete", "confirming"),
        ("Yes, proceed", "confirming"),
        ("Jetzt kaufen", "buying"),
        ("Löschen", "deleting"),
        ("Acheter", "buying"),
        ("Eliminar", "deleting"),
        ("\uff22\uff55\uff59", "buying"),  # fullwidth "Buy"
        ("\u0412uy now", "buying"),  # a Cyrillic Ve for the B
        ("B\u200buy now", "buying"),  # a zero-width space inside
        ("\u0421heckout", "buying"),  # a Cyrillic Es for the C
    ],
)
def test_names_that_lie_still_read_as_what_they_do(name, meaning):
    assert critical_point_of("click", button(name)) == f"reads as {meaning}"


def test_the_visible_text_counts_when_the_aria_label_says_something_else():
    # The page's observer puts the visible text in `name` and the aria-label in `label`.
    assert critical_point_of("click", button("Buy now", label="Read more")) == "reads as buying"
    assert critical_point_of("click", button("Read more", label="Buy now")) == "reads as buying"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://shop.example/checkout/confirm", "opens an address that reads as buying"),
        ("https://shop.example/api/purchase?item=3", "opens an address that reads as buying"),
        ("https://mail.example/messages?action=delete&id=4", "opens an address that reads as deleting"),
        ("https://shop.example/products/blue-kettle", None),
        ("https://news.example/2026/12/01/story", None),
    ],
)
def test_go_to_an_address_that_reads_as_a_commitment_is_held(url, reason):
    assert go_to_critical(url) == reason
