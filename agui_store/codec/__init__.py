"""Bytes and events: reading every form a caller hands the store (JSON, JSON Lines, SSE) into
events with their exact JSON text, and writing events out again."""
