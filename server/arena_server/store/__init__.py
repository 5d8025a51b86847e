"""The SQLite store: schema and migrations, match records, bots, rating tables."""
