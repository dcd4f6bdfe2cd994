"""Turn leases: renewing or releasing one attempt's lease touches that turn's row and no other."""

from __future__ import annotations

import uuid

import pytest

from conversations.models import Turn, TurnStatus
from conversations.services import conversation_create
from conversations.turns import turn_attempt_restart, turn_claim, turn_lease_renew, turn_submit

pytestmark = pytest.mark.database


def submitted_turn() -> uuid.UUID:
    conversation = conversation_create()
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Hello")
    return turn.id


def leases() -> dict[uuid.UUID, tuple[str, object, str]]:
    return {row.id: (row.status, row.lease_expires_at, row.lease_token) for row in Turn.objects.all()}


@pytest.fixture
def turns(db) -> dict[str, object]:
    """Five turns in the table: two running under their own leases, three queued."""
    mine, other = turn_claim(turn_id=submitted_turn()), turn_claim(turn_id=submitted_turn())
    queued = [submitted_turn() for _ in range(3)]
    assert mine is not None
    assert other is not None
    return {"mine": mine, "other": other, "queued": queued}


def test_renewing_a_lease_moves_that_turn_only(turns):
    mine = turns["mine"]
    before = leases()

    assert turn_lease_renew(turn_id=mine.turn_id, lease_token=mine.lease_token)

    after = leases()
    assert after[mine.turn_id][1] > before[mine.turn_id][1]
    del before[mine.turn_id], after[mine.turn_id]
    assert after == before  # four other rows, untouched


def test_a_lease_another_attempt_holds_is_not_renewed(turns):
    mine = turns["mine"]
    before = leases()

    assert not turn_lease_renew(turn_id=mine.turn_id, lease_token="not-" + mine.lease_token)
    assert not turn_lease_renew(turn_id=turns["queued"][0], lease_token=mine.lease_token)

    assert leases() == before


def test_restarting_a_stalled_attempt_releases_and_retakes_its_own_lease_only(turns):
    mine, other = turns["mine"], turns["other"]
    before = leases()

    again = turn_attempt_restart(claim=mine, provider="anthropic", model="claude-sonnet-4-5")

    assert again is not None
    assert again.attempt == 2
    after = leases()
    assert after[mine.turn_id][0] == TurnStatus.RUNNING
    del before[mine.turn_id], after[mine.turn_id]
    assert after == before
    # The other running turn was never claimable: its lease is live, and its attempt keeps it.
    assert turn_claim(turn_id=other.turn_id) is None
    assert turn_lease_renew(turn_id=other.turn_id, lease_token=other.lease_token)
