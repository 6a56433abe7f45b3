"""Pure text cores: chunking, headings and note properties. No I/O."""
