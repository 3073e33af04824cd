"""Deployment helpers: generated manifests for running the exporter outside the compose bundle."""
