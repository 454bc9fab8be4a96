"""RQ jobs. Job functions stay thin: they take ids, not objects, and call into omniroute."""

# Queue names, in the order a worker serves them.
QUEUES = ("default",)
