"""Value rules and file writes that every layer shares; imports torch at most, nothing of andrea."""
