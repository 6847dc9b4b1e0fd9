"""HTTP endpoints, grouped by page."""
