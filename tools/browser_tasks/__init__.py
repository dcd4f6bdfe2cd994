"""The browser side of browser tasks: pages as numbered-element text, actions, critical points, kept contexts.

Nothing here knows about models, conversations or events: the orchestration (the task's
model loop, its rows, proposals and replies) lives in `conversations.browser_tasks`, which
drives a `BrowserSession` step by step and decides with `critical.critical_point_of`
which actions must wait for the owner.
"""
