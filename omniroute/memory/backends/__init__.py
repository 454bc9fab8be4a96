"""Memory backends: where memories live, behind one interface (REFERENCE section 13).

`base` names the interface and its values, `wire` the JSON a remote backend speaks,
`generic` the HTTP backend that adapts any REST memory service to it.
"""
