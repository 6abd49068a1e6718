"""Who may act, and what they did: the users of `flows ui` with their roles (tokens stored
as hashes) and the audit log of changes made through the API and the command line."""
