"""The memory core (first floor): what a memory is and where it is kept (`model`, `store`,
`history`, `listing`), how it is found (`search/`), how it ages and is forgotten (`life/`),
how facts are drawn from chats (`extraction/`), where vectors come from (`embedding/`), the
remote backends (`backends/`) and the Qdrant tier (`qdrant/`). It imports only `core`."""
