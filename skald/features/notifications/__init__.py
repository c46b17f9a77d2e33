"""Notifications without the server around them: batching, quiet hours, Web Push
(RFC 8291 payload encryption, RFC 8292 VAPID) and the `notify` tool. The service that
ties them to members and channels is `skald.features.notifications.service`."""
