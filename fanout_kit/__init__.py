"""The fan-out kit's constructs: ParallelFanOut, DistributedMapFanOut, CompletionLedger."""
