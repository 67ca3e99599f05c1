"""The completion-ledger pattern: finalize once when concurrent Lambdas drain SQS or Kinesis
(``CompletionLedger``)."""
