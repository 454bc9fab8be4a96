-- Upstream OpenAI-compatible providers. A model "provider/model" is sent to the provider with
-- that id as "model". The API key is needed in clear to call the provider; the API never
-- returns it (only whether there is one, and its last four characters).
CREATE TABLE providers (
    id TEXT PRIMARY KEY,
    base_url TEXT NOT NULL,
    api_key TEXT,
    models TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(models)),
    embedding_models TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(embedding_models)),
    supports_system_role INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
