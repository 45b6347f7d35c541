"""criteria."""
