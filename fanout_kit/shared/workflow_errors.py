"""Error names the kit's workflows raise themselves (a Fail state's ``error``), shared by the
patterns that raise them and the rules that keep users' error names apart from them
(``fanout_kit.shared.retry_policy.RESERVED_ERROR_NAMES``)."""

ITEMS_DEAD_LETTERED = "ItemsDeadLettered"  # the Distributed Map's: failed items reached the DLQ
