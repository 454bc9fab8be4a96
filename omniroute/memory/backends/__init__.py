"""Memory backends: where memories live, behind one interface (REFERENCE section 13).

`base` names the interface and its values; `local` is the store; `guarded` sends remote
requests; `generic` adapts any REST memory service (`wire`: its JSON) and `obsidian` a vault;
`known` makes them from `backendConfigs`, `manager` routes between them, `setup` keeps the
manager as the settings say.
"""
