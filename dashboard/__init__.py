"""Dash front end: layout, callbacks, pure figure builders and server-side state."""
