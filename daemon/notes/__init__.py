"""The note tools: read, list, link and (opt-in) write the notes of a vault (decision 0028)."""
