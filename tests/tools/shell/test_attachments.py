"""The conversation's attachments inside the shell sandbox, and files it hands back from /workspace/out/.

Real turns: the model is the loopback provider, the command runs in the real sandbox
(network `none`), uploads and downloads go through the real HTTP API.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from attachments.models import Attachment
from conversations.turns import turn_submit
from tests.attachments.support import upload
from tests.support.engine import assistant_parts, new_conversation, orm, run, tool_parts
from tests.support.fake_providers import Call, Text

pytestmark = pytest.mark.django_db(transaction=True)

MB = 1024 * 1024


async def uploaded(client, conversation_id: uuid.UUID, name: str, content: bytes) -> dict[str, Any]:
    response = await orm(upload)(client, conversation_id, name, content)
    assert response.status_code == 201, response.content
    return response.json()


async def shell_turn(
    fake_providers, cancels, conversation_id: uuid.UUID, command: str, attachments: list[str] | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run a turn whose model runs one command; return the call's output and the answer's attachment parts."""
    fake_providers.script([Call("c1", "shell", {"command": command})], [Text("Done.")])
    turn, _ = await orm(turn_submit)(
        conversation_id=conversation_id, request_id=uuid.uuid4(), text="Run it", attachments=attachments
    )
    await run(turn.id, cancels, timeout=90)
    parts = await assistant_parts(turn.id)
    [part] = tool_parts(parts)
    assert part["status"] == "succeeded", part
    return part["output"], [p for p in parts if p["type"] == "attachment"]


async def test_the_shell_reads_the_attachments_and_cannot_change_them(owner_client, anthropic, fake_providers, cancels):
    conversation_id = await new_conversation()
    table = await uploaded(owner_client, conversation_id, "table.csv", b"a,b\n1,2\n")
    again = await uploaded(owner_client, conversation_id, "table.csv", b"c,d\n3,4\n")
    command = (
        "cat /workspace/attachments/table.csv '/workspace/attachments/table (2).csv'; "
        "stat -c '%a %U %n' /workspace/attachments /workspace/attachments/*; "
        "echo x > /workspace/attachments/table.csv || echo no-write; "
        "touch /workspace/attachments/new || echo no-create; "
        "rm -f /workspace/attachments/table.csv || echo no-remove; "
        "chmod 666 /workspace/attachments/table.csv || echo no-chmod; "
        "echo mine > /workspace/mine && cat /workspace/mine"
    )

    output, returned = await shell_turn(
        fake_providers, cancels, conversation_id, command, attachments=[table["id"], again["id"]]
    )

    assert output["stdout"] == (
        "a,b\n1,2\nc,d\n3,4\n"
        "755 root /workspace/attachments\n"  # the volume's root: the engine makes it 0755, root's
        "444 root /workspace/attachments/table (2).csv\n"
        "444 root /workspace/attachments/table.csv\n"
        "no-write\nno-create\nno-remove\nno-chmod\nmine\n"
    )
    assert sorted(output["attachments_copied"]) == ["table (2).csv", "table.csv"]
    assert returned == []
    # The upload is untouched.
    download = await orm(owner_client.get)(f"/api/attachments/{table['id']}/")
    assert b"".join(download.streaming_content) == b"a,b\n1,2\n"


async def test_a_hostile_attachment_name_becomes_a_safe_file_name(owner_client, anthropic, fake_providers, cancels):
    conversation_id = await new_conversation()
    hostile = "../../x\x1b[31m\n" + "y" * 300 + ".txt"
    sent = await uploaded(owner_client, conversation_id, hostile, b"hostile\n")
    command = 'cd /workspace/attachments && for f in *; do printf \'%s|\' "$f"; cat -- "$f"; done; ls -A /workspace'

    output, _ = await shell_turn(fake_providers, cancels, conversation_id, command, attachments=[sent["id"]])

    [name] = output["attachments_copied"]
    assert output["stdout"] == f"{name}|hostile\nattachments\n"  # nothing landed outside the directory
    assert name.endswith(".txt")
    assert name.startswith("x[31m")
    assert not any(bad in name for bad in ("..", "/", "\x1b", "\n"))
    assert len(name.encode()) <= 200


async def test_a_file_written_to_out_comes_back_as_an_attachment_of_the_answer(
    owner_client, anthropic, fake_providers, cancels
):
    conversation_id = await new_conversation()
    weird = "\"out/$(printf 'we\\tird\\x01.txt')\""
    command = f"mkdir -p out && printf 'x,y\\n1,2\\n' > out/result.csv && printf 'a\\x01\\n' > {weird}"

    output, returned = await shell_turn(fake_providers, cancels, conversation_id, command)

    assert [(p["name"], p["media_type"], p["size"]) for p in returned] == [
        ("result.csv", "text/csv", 8),
        ("weird.txt", "text/plain", 3),
    ]
    assert output["attachments"] == returned
    assert "files_not_returned" not in output
    response = await orm(owner_client.get)(f"/api/conversations/{conversation_id}/messages/")
    answer = response.json()["messages"][-1]
    assert [p for p in answer["parts"] if p["type"] == "attachment"] == returned
    assert set(returned[0]) == {"type", "id", "name", "media_type", "size"}
    download = await orm(owner_client.get)(f"/api/attachments/{returned[0]['id']}/")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == b"x,y\n1,2\n"
    assert download["Content-Disposition"].startswith("attachment")


async def test_ten_files_come_back_and_the_eleventh_is_said(owner_client, anthropic, fake_providers, cancels):
    conversation_id = await new_conversation()
    command = "mkdir -p out && for i in $(seq -w 1 11); do echo $i > out/f$i.txt; done"

    output, returned = await shell_turn(fake_providers, cancels, conversation_id, command)

    assert [p["name"] for p in returned] == [f"f{i:02d}.txt" for i in range(1, 11)]
    assert output["files_not_returned"] == ["f11.txt: not returned, at most 10 files come back."]


async def test_twenty_megabytes_in_all_come_back_and_one_byte_more_does_not(
    owner_client, anthropic, fake_providers, cancels
):
    conversation_id = await new_conversation()
    half = 10 * MB
    write = "head -c {size} /dev/zero | tr '\\0' a > out/{name}"
    exact = f"mkdir -p out && {write.format(size=half, name='a.txt')} && {write.format(size=half, name='b.txt')}"

    output, returned = await shell_turn(fake_providers, cancels, conversation_id, exact)

    assert [(p["name"], p["size"]) for p in returned] == [("a.txt", half), ("b.txt", half)]
    assert "files_not_returned" not in output
    over = f"mkdir -p out && {write.format(size=half, name='a.txt')} && {write.format(size=half + 1, name='b.txt')}"

    output, returned = await shell_turn(fake_providers, cancels, conversation_id, over)

    assert [(p["name"], p["size"]) for p in returned] == [("a.txt", half)]
    assert output["files_not_returned"] == ["b.txt: not returned, the files coming back may be 20 MB in all."]


async def test_links_and_refused_types_in_out_come_back_as_nothing(owner_client, anthropic, fake_providers, cancels):
    conversation_id = await new_conversation()
    command = (
        "mkdir -p out/sub && echo secret > /tmp/secret && ln -s /etc/passwd out/passwd && "
        "ln -s /tmp/secret out/outside && ln -s ../../etc/hostname out/up && echo inner > out/sub/inner.txt && "
        "printf '<html><script>alert(1)</script>' > out/page.txt"
    )

    output, returned = await shell_turn(fake_providers, cancels, conversation_id, command)

    assert returned == []
    assert output["files_not_returned"] == [
        "outside: not returned, only regular files are (this is a symbolic link).",
        "passwd: not returned, only regular files are (this is a symbolic link).",
        "sub: not returned, only regular files are (this is a directory).",
        "up: not returned, only regular files are (this is a symbolic link).",
        "page.txt: not returned, web pages, svg and xml are not supported as attachments.",
    ]
    assert not await orm(Attachment.objects.filter(conversation_id=conversation_id).exists)()
