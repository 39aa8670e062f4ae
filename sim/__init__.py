"""blksim's engine: bios and requests, the block layer, the run loop, metrics, config and CLI."""
