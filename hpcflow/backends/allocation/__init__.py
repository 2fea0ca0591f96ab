"""Inside an allocation you already have: start the ranks now, submit nothing."""
