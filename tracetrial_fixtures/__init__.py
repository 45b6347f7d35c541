"""tracetrial_fixtures."""
