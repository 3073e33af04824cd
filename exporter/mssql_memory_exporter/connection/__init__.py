"""Connecting to SQL Server: login of every kind, the session, the prepared batch, worker threads."""
