"""Channels: how members reach their assistant (the web chat hub; Telegram later)."""
