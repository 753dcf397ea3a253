"""What learning tells whoever listens (its tasks, to schedule a refresh)."""

from django.dispatch import Signal

# Sent after a commit that folded new traces into tools' statistics, with ``tool_names``.
tool_stats_changed = Signal()

# Sent after a commit that stored new traces, with ``count``: they wait to be folded.
traces_stored = Signal()
