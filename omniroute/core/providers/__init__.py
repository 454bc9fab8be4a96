"""Upstream providers, below both the proxy and the memory core.

`registry` keeps them (and the default one), `client` makes every outbound JSON call to
them, `schemas` describes them for the REST API and for seeding from OMNIROUTE_PROVIDERS.
"""
