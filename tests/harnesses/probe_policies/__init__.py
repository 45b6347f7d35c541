"""Probe policies driving the golden captures through the real probe model + gateway."""
