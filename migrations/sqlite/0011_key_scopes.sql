-- What a gateway key may do with its memories through the MCP tools, space-separated as
-- OAuth scopes are: `read:memory` (search, get, list) and `write:memory` (add, update,
-- delete, clear). Keys made before scopes existed keep both.
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT 'read:memory write:memory';
