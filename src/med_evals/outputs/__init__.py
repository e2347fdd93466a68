"""What a command writes: files written whole, text escaped for where it goes."""
