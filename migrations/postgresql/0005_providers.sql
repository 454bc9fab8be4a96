-- Upstream OpenAI-compatible providers (as sqlite/0005); api_key is sealed by the app.
CREATE TABLE providers (
    id TEXT PRIMARY KEY,
    base_url TEXT NOT NULL,
    api_key TEXT,
    models TEXT NOT NULL DEFAULT '[]' CHECK (models::jsonb IS NOT NULL),
    embedding_models TEXT NOT NULL DEFAULT '[]' CHECK (embedding_models::jsonb IS NOT NULL),
    supports_system_role INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
