"""The multi-queue block layer (blk-mq) of Linux 5.4 to 6.6: docs/blk-mq.md."""
