"""RQ jobs. Job functions stay thin: they take ids and plain values and call into omniroute."""

# Queue names, in the order a worker serves them.
EXTRACTION_QUEUE = "extraction"
DEFAULT_QUEUE = "default"
QUEUES = (EXTRACTION_QUEUE, DEFAULT_QUEUE)
