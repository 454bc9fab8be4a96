"""The HTTP edge every face shares (wiring floor): the admin guard, the JSON edge every
request passes, security headers, each response's request id, log line and metrics, and the
home page at /."""
