"""The Parallel workflow's own Lambda handler (ValidateInput)."""
