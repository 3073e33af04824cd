"""Metric families and the exposition text they are written as."""
