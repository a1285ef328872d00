"""The `tidemark` subcommands beyond `stream`: `status` (what is committed, whether the
streamer runs, the source's head) and `signal` (send a signal through the connector's
channel and follow it). `cdc_core.cli` parses the command line and calls them."""
