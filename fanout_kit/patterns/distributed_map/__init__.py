"""The Distributed Map pattern: N items, a few to millions (``DistributedMapFanOut``)."""
