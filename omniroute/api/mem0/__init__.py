"""mem0's platform API as a face of the gateway's memory (docs/mem0.md).

`mem0ai`'s MemoryClient (pinned: 2.2.1) reaches the same memories as /api/memory, MCP and
the chats: mem0's `user_id` is an end user of the key (docs/scopes.md), `run_id` a session,
`agent_id` and `app_id` are kept in the memory's metadata. blueprint.py holds the routes,
shapes.py how a memory and its history look in mem0's words and what its filters mean,
adding.py what `add` stores (the gateway's own extraction when `infer` is true).
"""
