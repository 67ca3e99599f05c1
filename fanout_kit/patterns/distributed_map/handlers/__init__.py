"""The Map workflow's own Lambda handlers (PrepareBatch, RetryFailedItems, ForwardFailedItems)."""
