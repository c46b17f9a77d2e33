"""Channels: ways members reach their assistant besides the web UI (Telegram next).

A channel parses its own wire format and calls the channel-neutral conversation service
in the core; it holds no chat logic of its own.
"""
