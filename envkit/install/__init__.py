"""Plans land in prefixes: create (staging, swap), the in-place installer, transactions and their recovery."""
