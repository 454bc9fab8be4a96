"""RQ jobs. Job functions stay thin: they take ids and plain values and call into omniroute."""

# Queue names, in the order a worker serves them.
EXTRACTION_QUEUE = "extraction"
EMBEDDINGS_QUEUE = "embeddings"
DEFAULT_QUEUE = "default"
QUEUES = (EXTRACTION_QUEUE, EMBEDDINGS_QUEUE, DEFAULT_QUEUE)
# Fixed id of the backfill job: many requests for it fold into one waiting run.
BACKFILL_JOB_ID = "memory-vector-backfill"
STATIC_MODEL_JOB_ID = "build-static-model"
