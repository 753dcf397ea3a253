"""What the registry tells the apps above it, after the change commits.

Each app defines its signals in its ``signals`` module and connects receivers (its
``handlers``) in its ``AppConfig.ready()``: a higher layer follows the registry by connecting
to these, with no import upwards.
"""

from django.dispatch import Signal

# Sent with no arguments once a revision bump has committed (``registry.revision``), in the
# committing process; receivers read the revision they need.
revision_changed = Signal()

# A version became its tool's current one: sent after commit with ``version_id``. A version
# whose lifecycle is ``deprecated`` retires its tool.
contract_published = Signal()
