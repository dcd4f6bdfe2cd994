"""Browser tasks as the conversation sees them: proposals, the owner's controls, the task's model loop.

- `services`: what the owner and the chat model do (propose, start, dismiss, answer a
  critical point, cancel).
- `lifecycle`: the task's durable lifecycle (claim, steps, pause, finish, projection,
  reconciliation, deletion).
- `runner`: the task's own model loop on a worker's engine loop, driving the browser side
  (`tools.browser_tasks`) with the conversation's current model and key.
- `live_view`: the sign-in handoff's screenshots and the owner's input.
- `propose`: the chat tool `browser_task_propose`.
- `selectors`, `api`: the list endpoint and the HTTP controls.
"""
