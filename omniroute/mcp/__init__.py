"""The MCP server: memory tools for any MCP client, over stdio and streamable HTTP."""
