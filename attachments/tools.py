"""The read_attachment tool (filled in below)."""

from __future__ import annotations

from tools.registry import Tool

TOOLS: list[Tool] = []
