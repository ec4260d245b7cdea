"""The growth fence: changing input partition counts without breaking any key's order
(KIP-253).

``expand_topic`` grows or shrinks a topic in steps that each survive a crash: hold the app's
control log (``hold``), record the new count in the topic registry, wait out every producer's
lease (``lease``: counts are used only while the registry can be re-read), write markers
(``markers``: growth markers in the parents, drain markers in deleted partitions) and record
them. Readers then hold each record until its key's earlier records were read (``gates``:
a new life of a partition until its parent passes the marker, a key merged into a survivor
until its deleted partition passes the drain marker), and refuse records that are not where
linear hashing places their keys at their offset (``placement``: where keys go; ``late``:
where they live; ``placement_check``: the check of each input record).
"""

from framework.growth.expand import ExpandError, expand_topic
from framework.growth.gates import blocked_partitions
from framework.growth.lease import ProducerLeaseError, RegistryLease
from framework.growth.markers import MARKER_HEADER, is_marker
from framework.growth.placement import COUNT_HEADER, UNFENCED_SCOPE, LinearHashPartitioner

__all__ = [
    "COUNT_HEADER",
    "MARKER_HEADER",
    "UNFENCED_SCOPE",
    "ExpandError",
    "LinearHashPartitioner",
    "ProducerLeaseError",
    "RegistryLease",
    "blocked_partitions",
    "expand_topic",
    "is_marker",
]
