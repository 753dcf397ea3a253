"""What the registry tells the apps above it, after the change commits."""

from django.dispatch import Signal

# A version became its tool's current one: sent after commit with ``version_id``. A version
# whose lifecycle is ``deprecated`` retires its tool.
contract_published = Signal()
