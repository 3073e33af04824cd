"""One probe of one target: which collectors run, what the platform lacks, the batch's sections."""
