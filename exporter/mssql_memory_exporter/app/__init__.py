"""The process: command line, reload, logging, build info, the exporter's own metrics."""
