"""Telegram: a household's bot as one more way to chat with the assistant.

Built in and switched off until an administrator gives it a bot token (Telegram page
under Household). The bridge long-polls the Bot API (bridge.py), pairs chats with
members by one-time codes (store.py), carries each message through the conversation
service like the web does (turns.py), sends files (tool.py) and notifications
(channel.py). docs/dev/telegram.md has the rules and traps.
"""
