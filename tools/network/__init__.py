"""The one network policy every outbound fetch of the web tools passes, the browser's included.

`policy` decides on URLs and addresses (pure functions), `resolver` resolves names off the
event loop and returns only addresses the policy accepts, `fetch` makes pinned HTTP
requests with aiohttp, and `proxy` is the forward proxy Chromium must use, which connects
through the same resolver.
"""
