"""Storage: the one way into the database, its tables and migrations."""
