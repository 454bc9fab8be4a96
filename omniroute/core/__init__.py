"""Shared parts, the ground floor: what every other floor may import and that imports none of
them. The environment's settings (`config/`), the database (`db/`: engine, migrations,
tables, the settings store), the providers' registry and client (`providers/`), and small
parts: time, errors, fields, logs, metrics, the outbound URL guard, sealed secrets, gateway
keys, the admin guard's brake and sessions, activity counts."""
